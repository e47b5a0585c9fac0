"""The security page: every ACL binding and every user with SCRAM credentials, as the
console's principal may describe them, through seglog's gRPC Security service (Kafka's
DescribeAcls and DescribeUserScramCredentials). Codes are Kafka's; the names are
spelled as kafka-acls prints them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from seglog.client.cluster import CHANNEL_OPTIONS, call, parse_bootstrap
from seglog.client.errors import for_code
from seglog.client.security import ClientSecurity
from seglog.proto import security_pb2 as spb
from seglog.proto import security_pb2_grpc

RESOURCE_TYPES = {
    2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User",
}  # fmt: skip
PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {
    2: "All", 3: "Read", 4: "Write", 5: "Create", 6: "Delete", 7: "Alter", 8: "Describe",
    9: "ClusterAction", 10: "DescribeConfigs", 11: "AlterConfigs", 12: "IdempotentWrite",
    13: "CreateTokens", 14: "DescribeTokens",
}  # fmt: skip
PERMISSIONS = {2: "Deny", 3: "Allow"}
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
# Kafka's ANY in every field of a filter: every binding.
_ANY = 1


@dataclass(frozen=True, slots=True)
class Acl:
    principal: str
    host: str
    permission: str
    operation: str
    resource_type: str
    resource_name: str
    pattern_type: str


@dataclass(frozen=True, slots=True)
class User:
    name: str
    credentials: tuple[str, ...]  # "SCRAM-SHA-256 (iterations 4096)", ...
    error: str


def _name(codes: Mapping[int, str], code: int) -> str:
    return codes.get(code, f"unknown ({code})")


def acl_from_proto(b: spb.AclBinding) -> Acl:
    return Acl(
        principal=b.principal,
        host=b.host,
        permission=_name(PERMISSIONS, b.permission_type),
        operation=_name(OPERATIONS, b.operation),
        resource_type=_name(RESOURCE_TYPES, b.resource_type),
        resource_name=b.resource_name,
        pattern_type=_name(PATTERN_TYPES, b.pattern_type),
    )


class SecurityClient:
    """One channel to the first bootstrap node, with the console's own login."""

    def __init__(
        self, bootstrap: str, security: Mapping[str, str | None], timeout_s: float
    ) -> None:
        (host, port), *_ = parse_bootstrap(bootstrap)
        self.channel = ClientSecurity.from_options(security).channel(
            f"{host}:{port}", CHANNEL_OPTIONS
        )
        self.stub = security_pb2_grpc.SecurityStub(self.channel)
        self.timeout_s = timeout_s

    def close(self) -> None:
        self.channel.close()

    def acls(self) -> list[Acl]:
        """Every binding; raises the node's error (SECURITY_DISABLED without an
        authorizer, CLUSTER_AUTHORIZATION_FAILED when not allowed to describe)."""
        request = spb.AclFilter(
            resource_type=_ANY, pattern_type=_ANY, operation=_ANY, permission_type=_ANY
        )
        r = call(self.stub.DescribeAcls, request, self.timeout_s)
        if r.error_code:
            raise for_code(r.error_code, r.error_message)
        acls = [acl_from_proto(b) for b in r.bindings]
        return sorted(acls, key=lambda a: (a.principal, a.resource_type, a.resource_name))

    def users(self) -> list[User]:
        r = call(
            self.stub.DescribeUserScramCredentials,
            spb.DescribeUserScramCredentialsRequest(),
            self.timeout_s,
        )
        out = []
        for u in r.results:
            error = str(for_code(u.error_code, u.error_message)) if u.error_code else ""
            creds = tuple(
                f"{_name(MECHANISMS, c.mechanism)} (iterations {c.iterations})"
                for c in u.credentials
            )
            out.append(User(u.user, creds, error))
        return sorted(out, key=lambda u: u.name)
