"""What a broker does for the SCRAM and ACL admin requests, whichever listener they
came in on (Kafka's APIs or seglog's gRPC `Security` service): check the caller may
(ALTER or DESCRIBE on the cluster), check the request's form, turn it into metadata
records and have the controller commit them (seglog.controller.security_control).
Describes read the node's metadata image."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

from ..event_log import EventLogger
from .acls import CLUSTER_NAME, AclBinding, AclFilter, AclOperation, ResourceType
from .node_authorizer import NodeAuthorizer, binding_of
from .scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

_log = EventLogger("security")
Commit = Callable[[Sequence[MetadataRecord]], list[tuple[str, str]]]


class SecurityAdmin:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        commit: Commit,
        authorizer: NodeAuthorizer | None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._image = image
        self._commit = commit
        self.authorizer = authorizer
        self._new_id = new_id

    def metadata_image(self) -> MetadataImage:
        return self._image()

    # --- lookups for authentication ------------------------------------------------

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        code = {v: k for k, v in MECHANISM_NAMES.items()}.get(mechanism)
        r = self._image().scram_credentials.get((user, code)) if code else None
        if r is None:
            return None
        return ScramCredential(
            mechanism,
            bytes.fromhex(r.salt),
            bytes.fromhex(r.stored_key),
            bytes.fromhex(r.server_key),
            r.iterations,
        )

    def may(self, principal: str, host: str, operation: AclOperation) -> bool:
        """May the caller do `operation` on the cluster (no authorizer: yes)?"""
        return self._cluster(principal, host, operation)

    def _cluster(self, principal: str, host: str, operation: AclOperation) -> bool:
        return self.authorizer is None or self.authorizer.authorize(
            principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME
        )

    def commit_records(self, records: Sequence[MetadataRecord]) -> list[tuple[str, str]]:
        if not records:
            return []
        try:
            return self._commit(records)
        except ControlError as e:
            return [(e.error_name, str(e))] * len(records)

    # --- SCRAM credentials -----------------------------------------------------------

    def alter_scram(
        self,
        principal: str,
        host: str,
        deletions: Sequence[tuple[str, int]],
        upsertions: Sequence[tuple[str, int, int, bytes, bytes]],
    ) -> list[tuple[str, str, str]]:
        """(user, error, message) per user, as Kafka answers AlterUserScramCredentials."""
        users = [d[0] for d in deletions] + [u[0] for u in upsertions]
        order = list(dict.fromkeys(users))
        if not self._cluster(principal, host, AclOperation.ALTER):
            return [(u, "CLUSTER_AUTHORIZATION_FAILED", "") for u in order]
        errors: dict[str, tuple[str, str]] = {}
        seen: set[tuple[str, int]] = set()
        for name, mechanism in [(d[0], d[1]) for d in deletions] + [
            (u[0], u[1]) for u in upsertions
        ]:
            if (name, mechanism) in seen:
                errors[name] = ("DUPLICATE_RESOURCE", "a user's mechanism appears twice")
            seen.add((name, mechanism))
            if not name:
                errors[name] = ("UNACCEPTABLE_CREDENTIAL", "the user name is empty")
            elif mechanism not in MECHANISM_NAMES:
                errors[name] = ("UNSUPPORTED_SASL_MECHANISM", f"unknown mechanism {mechanism}")
        records: list[MetadataRecord] = []
        owners: list[str] = []
        for name, mechanism in deletions:
            if name not in errors:
                records.append(RemoveUserScramCredentialRecord(name, mechanism))
                owners.append(name)
        for name, mechanism, iterations, salt, salted in upsertions:
            if name in errors:
                continue
            if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
                errors[name] = (
                    "UNACCEPTABLE_CREDENTIAL",
                    f"iterations {iterations} out of [{MIN_ITERATIONS}, {MAX_ITERATIONS}]",
                )
                continue
            if not salt or not salted:
                errors[name] = ("UNACCEPTABLE_CREDENTIAL", "empty salt or salted password")
                continue
            c = credential_from_salted(MECHANISM_NAMES[mechanism], salted, salt, iterations)
            records.append(
                UserScramCredentialRecord(
                    name, mechanism, salt.hex(), c.stored_key.hex(), c.server_key.hex(), iterations
                )
            )
            owners.append(name)
        for owner, (error, message) in zip(owners, self.commit_records(records), strict=True):
            if error != "NONE":
                errors.setdefault(owner, (error, message))
        _log.info("scram_credentials_altered", principal=principal, users=order)
        return [(u, *errors.get(u, ("NONE", ""))) for u in order]

    def describe_scram(
        self, principal: str, host: str, users: Sequence[str] | None
    ) -> list[tuple[str, str, str, list[tuple[int, int]]]]:
        """(user, error, message, [(mechanism, iterations)]) per user."""
        if not self._cluster(principal, host, AclOperation.DESCRIBE):
            return [(u, "CLUSTER_AUTHORIZATION_FAILED", "", []) for u in users or [""]]
        by_user: dict[str, list[tuple[int, int]]] = {}
        for (name, mechanism), r in sorted(self._image().scram_credentials.items()):
            by_user.setdefault(name, []).append((mechanism, r.iterations))
        if users is None:
            return [(u, "NONE", "", creds) for u, creds in sorted(by_user.items())]
        return [
            (u, "NONE", "", by_user[u])
            if u in by_user
            else (
                u,
                "RESOURCE_NOT_FOUND",
                f"attempt to describe a user credential that does not exist: {u}",
                [],
            )
            for u in users
        ]

    # --- ACLs --------------------------------------------------------------------------

    def _acl_gate(self, principal: str, host: str, operation: AclOperation) -> str | None:
        if self.authorizer is None:
            return "SECURITY_DISABLED"
        if not self._cluster(principal, host, operation):
            return "CLUSTER_AUTHORIZATION_FAILED"
        return None

    def create_acls(
        self, principal: str, host: str, bindings: Sequence[AclBinding]
    ) -> list[tuple[str, str]]:
        refused = self._acl_gate(principal, host, AclOperation.ALTER)
        if refused:
            return [(refused, "")] * len(bindings)
        results: list[tuple[str, str]] = [("NONE", "")] * len(bindings)
        records: list[MetadataRecord] = []
        where: list[int] = []
        for i, b in enumerate(bindings):
            why = b.check()
            if why:
                results[i] = ("INVALID_REQUEST", why)
                continue
            records.append(
                AccessControlEntryRecord(
                    self._new_id(),
                    int(b.resource_type),
                    b.resource_name,
                    int(b.pattern_type),
                    b.principal,
                    b.host,
                    int(b.operation),
                    int(b.permission),
                )
            )
            where.append(i)
        for i, (error, message) in zip(where, self.commit_records(records), strict=True):
            results[i] = (error, "" if error == "NONE" else message)
        _log.info("acls_created", principal=principal, count=len(records))
        return results

    def describe_acls(
        self, principal: str, host: str, f: AclFilter
    ) -> tuple[str, str, list[AclBinding]]:
        refused = self._acl_gate(principal, host, AclOperation.DESCRIBE)
        if refused:
            return refused, "", []
        found = [binding_of(r) for r in list(self._image().acls.values())]
        return "NONE", "", sorted(b for b in found if f.matches(b))

    def delete_acls(
        self, principal: str, host: str, filters: Sequence[AclFilter]
    ) -> list[tuple[str, str, list[AclBinding]]]:
        refused = self._acl_gate(principal, host, AclOperation.ALTER)
        if refused:
            return [(refused, "", [])] * len(filters)
        entries = list(self._image().acls.values())
        matched: list[list[AccessControlEntryRecord]] = [
            [r for r in entries if f.matches(binding_of(r))] for f in filters
        ]
        ids = list(dict.fromkeys(r.id for group in matched for r in group))
        results = self.commit_records([RemoveAccessControlEntryRecord(i) for i in ids])
        failed = {i: res for i, res in zip(ids, results, strict=True) if res[0] != "NONE"}
        out = []
        for group in matched:
            errors = [failed[r.id] for r in group if r.id in failed]
            if errors:
                out.append((errors[0][0], errors[0][1], []))
            else:
                out.append(("NONE", "", sorted(binding_of(r) for r in group)))
        _log.info("acls_deleted", principal=principal, count=len(ids))
        return out
