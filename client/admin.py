"""Cluster administration, shaped like kafka-python's KafkaAdminClient: one `Admin`
over the per-area operations — topics (admin_topics.py), partitions: leader
elections, reassignments and offsets (admin_partitions.py), configs
(admin_configs.py), consumer groups (admin_groups.py) and transactions
(admin_transactions.py) — that share the retry
loop of admin_requests.py. The arguments and answers are in admin_types.py.

Error policy: a per-topic error the node returns is raised as the matching
KafkaError subclass (`for_code`) carrying the node's message. Batch calls
(`create_topics`, `delete_topics`) send the whole batch, then raise the error of
the first failed topic (in request order); the exception also carries
`.topic` (that topic's name), `.errors` (every failed topic → its error) and
`.results` (every topic that succeeded), so a caller can see exactly what
happened to the rest of the batch. When nothing fails they return the results.

Requests that fail for reasons outside them (a node down, NOT_CONTROLLER) are
retried until `request_timeout_ms`, as admin_requests.py says.
"""

from __future__ import annotations

from collections.abc import Sequence

from .admin_configs import ConfigAdmin
from .admin_groups import GroupAdmin
from .admin_partitions import PartitionAdmin
from .admin_topics import TopicAdmin
from .admin_transactions import TransactionAdmin
from .admin_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    CreateTopicResult,
    GroupInformation,
    GroupListing,
    MemberInformation,
    NewPartitions,
    NewTopic,
    OffsetResult,
    PartitionDescription,
    PartitionReassignment,
    TopicDescription,
)
from .cluster import ClusterMetadata, Connections
from .group_coordinator import OffsetAndMetadata
from .security import ClientSecurity


class Admin(TopicAdmin, PartitionAdmin, ConfigAdmin, GroupAdmin, TransactionAdmin):
    """`Admin(bootstrap_servers="127.0.0.1:9192")`; thread-safe; `close()` when done
    (or use it as a context manager)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9192",
        request_timeout_ms: int = 30_000,
        client_id: str = "seglog-admin",
        metadata_max_age_ms: int = 300_000,
        **security: str | None,
    ) -> None:
        client_security = ClientSecurity.from_options(security)
        if request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be positive, got {request_timeout_ms}")
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            Connections(client_security),
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._metadata.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


KafkaAdminClient = Admin

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "Admin",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "CreateTopicResult",
    "GroupInformation",
    "GroupListing",
    "MemberInformation",
    "OffsetAndMetadata",
    "KafkaAdminClient",
    "NewPartitions",
    "NewTopic",
    "OffsetResult",
    "PartitionDescription",
    "PartitionReassignment",
    "TopicDescription",
]
