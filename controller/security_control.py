"""The controller's decisions on security and client records, pure: a broker proposes
SCRAM credentials and ACL entries (and their removals), client quotas
(ClientQuotaRecord) and group configs (GROUP ConfigRecords), already checked for
form; the controller checks them against its image, in order, and commits those that
hold. Each proposal gets (Kafka's error name, message): NONE when its record is
taken."""

from __future__ import annotations

from collections.abc import Sequence

from seglog.controller.client_quotas import NO_ERROR, alteration_error
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    GROUP_RESOURCE,
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

MECHANISM_CODES = (1, 2)  # SCRAM-SHA-256, SCRAM-SHA-512
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384

Result = tuple[str, str]


def security_records(
    image: MetadataImage, proposed: Sequence[MetadataRecord]
) -> tuple[list[MetadataRecord], list[Result]]:
    records: list[MetadataRecord] = []
    results: list[Result] = []
    scram = dict(image.scram_credentials)
    acls = dict(image.acls)
    for r in proposed:
        result: Result = ("NONE", "")
        match r:
            case UserScramCredentialRecord():
                if not r.name:
                    result = ("UNACCEPTABLE_CREDENTIAL", "the user name is empty")
                elif r.mechanism not in MECHANISM_CODES:
                    result = ("UNSUPPORTED_SASL_MECHANISM", f"mechanism {r.mechanism}")
                elif not MIN_ITERATIONS <= r.iterations <= MAX_ITERATIONS:
                    result = (
                        "UNACCEPTABLE_CREDENTIAL",
                        f"iterations {r.iterations} out of [{MIN_ITERATIONS}, {MAX_ITERATIONS}]",
                    )
                else:
                    scram[(r.name, r.mechanism)] = r
            case RemoveUserScramCredentialRecord():
                if (r.name, r.mechanism) not in scram:
                    result = (
                        "RESOURCE_NOT_FOUND",
                        f"user {r.name!r} has no credential for mechanism {r.mechanism}",
                    )
                else:
                    del scram[(r.name, r.mechanism)]
            case AccessControlEntryRecord():
                same = any(
                    (
                        a.resource_type,
                        a.resource_name,
                        a.pattern_type,
                        a.principal,
                        a.host,
                        a.operation,
                        a.permission_type,
                    )
                    == (
                        r.resource_type,
                        r.resource_name,
                        r.pattern_type,
                        r.principal,
                        r.host,
                        r.operation,
                        r.permission_type,
                    )
                    for a in acls.values()
                )
                if r.id in acls:
                    result = ("INVALID_REQUEST", f"ACL id {r.id} is taken")
                elif same:
                    result = ("NONE", "exists")  # creating an existing ACL changes nothing
                else:
                    acls[r.id] = r
            case RemoveAccessControlEntryRecord():
                if r.id not in acls:
                    result = ("NONE", "gone")  # deleted meanwhile: nothing to do
                else:
                    del acls[r.id]
            case ClientQuotaRecord():
                error = alteration_error(r.entity, [(r.key, r.value, r.remove)])
                if error != NO_ERROR:
                    result = error
            case ConfigRecord() if r.resource_type == GROUP_RESOURCE:
                if not r.resource_name:
                    result = ("INVALID_REQUEST", "a group config needs a group id")
            case _:
                result = ("INVALID_REQUEST", f"{type(r).__name__} is not a security record")
        if result == ("NONE", ""):
            records.append(r)
        results.append(result)
    assert len(results) == len(proposed)
    return records, results


def security_applied(image: MetadataImage, r: MetadataRecord) -> bool:
    """Does `image` show security record `r` applied?"""
    match r:
        case UserScramCredentialRecord():
            return image.scram_credentials.get((r.name, r.mechanism)) == r
        case RemoveUserScramCredentialRecord():
            return (r.name, r.mechanism) not in image.scram_credentials
        case AccessControlEntryRecord():
            return r.id in image.acls
        case RemoveAccessControlEntryRecord():
            return r.id not in image.acls
        case ClientQuotaRecord():
            held = image.client_quotas.get(r.entity, {}).get(r.key)
            return held is None if r.remove else held == r.value
        case ConfigRecord():
            return image.group_configs.get(r.resource_name, {}).get(r.name) == r.value
    return True
