"""DescribeClientQuotas and AlterClientQuotas on the node's metadata, whichever
listener asked: the Kafka listener (node/kafka/client_quotas.py) and the gRPC
Security service, which the controller process serves too (a module of its own, so
that process does not import the Kafka listener)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from seglog.controller.client_quotas import (
    NO_ERROR,
    Entity,
    Error,
    QuotaFilterError,
    alteration_error,
    describe,
    entity_of,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import ClientQuotaRecord, MetadataRecord


class QuotaStore(Protocol):
    """Where quotas are read and committed: the node (Kafka's APIs) or its
    SecurityAdmin (seglog's gRPC `Security` service)."""

    def metadata_image(self) -> MetadataImage: ...
    def commit_records(self, records: Sequence[MetadataRecord]) -> list[tuple[str, str]]: ...


QuotaOps = list[tuple[str, float, bool]]  # (key, value, remove)
Pairs = list[tuple[str, str | None]]  # an entity's (type, name); name None: default


def describe_entries(
    node: QuotaStore, components: list[tuple[str, int, str | None]], strict: bool
) -> tuple[Error, list[tuple[Entity, dict[str, float]]]]:
    """DescribeClientQuotas on the node's image, whichever listener asked."""
    try:
        return NO_ERROR, describe(node.metadata_image().client_quotas, components, strict)
    except QuotaFilterError as e:
        return (e.error_name, str(e)), []


def alter_entries(
    node: QuotaStore, entries: list[tuple[Pairs, QuotaOps]], validate_only: bool, allowed: bool
) -> list[Error]:
    """AlterClientQuotas, whichever listener asked: each entry checked as Kafka's
    ClientQuotaControlManager does, the valid ones committed (unless validate_only);
    an error per entry."""
    errors: list[Error] = []
    records: list[MetadataRecord] = []
    owners: list[int] = []
    for i, (pairs, ops) in enumerate(entries):
        if not allowed:
            error = ("CLUSTER_AUTHORIZATION_FAILED", "not authorized to ALTER_CONFIGS")
        else:
            error = alteration_error(pairs, ops)
        errors.append(error)
        if error == NO_ERROR and not validate_only:
            entity = entity_of(pairs)
            for key, value, remove in ops:
                records.append(ClientQuotaRecord(entity, key, float(value), remove))
                owners.append(i)
    if records:
        for i, result in zip(owners, node.commit_records(records), strict=True):
            if result[0] != "NONE" and errors[i] == NO_ERROR:
                errors[i] = result
    return errors
