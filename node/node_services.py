"""What the client-facing services (the gRPC SegLog service and the Kafka-protocol
handlers) need from the node: one narrow surface, so both stay thin shells and tests
can stand a node in for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord
from seglog.controller.reassignment import OngoingReassignment
from seglog.proto import cluster_pb2 as cpb

from .groups.offsets_topic import GroupCoordinatorRuntime
from .log_dir_moves import LogDirMoves
from .replica_manager import ReplicaManager
from .security.node_authorizer import NodeAuthorizer
from .transactions.txn_runtime import TransactionCoordinatorRuntime
from .transactions.verification_sender import VerificationSender


class NodeServices(Protocol):
    node_id: int
    cluster_id: str
    replica_manager: ReplicaManager
    fetch_max_bytes: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    groups: GroupCoordinatorRuntime
    transactions: TransactionCoordinatorRuntime
    # KIP-890's verification of transactional appends; None when turned off.
    txn_verification: VerificationSender | None
    authorizer: NodeAuthorizer | None  # ACLs; None: off
    log_dir_moves: LogDirMoves  # AlterReplicaLogDirs

    def metadata_image(self) -> MetadataImage: ...
    def controller_id(self) -> int: ...
    def create_topic(
        self,
        name: str,
        partitions: int,
        rf: int,
        configs: dict[str, str],
        validate_only: bool,
        assignments: Sequence[tuple[int, Sequence[int]]] = (),
    ) -> str: ...
    def delete_topic(self, name: str) -> None: ...
    def elect_leaders(
        self, election: str, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str]: ...
    def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, tuple[int, ...] | None]]
    ) -> dict[tuple[str, int], tuple[str, str]]: ...
    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[OngoingReassignment]: ...
    def create_partitions(
        self,
        name: str,
        total_count: int,
        validate_only: bool,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None: ...
    def alter_configs(
        self, topic: str, changes: dict[str, str | None], validate_only: bool
    ) -> None: ...
    def describe_topic_config(self, topic: str) -> list[tuple[str, str, int]]: ...
    def alter_broker_configs(
        self, broker: str, changes: dict[str, str | None], validate_only: bool
    ) -> None: ...
    def describe_broker_config(self, broker: str) -> list[tuple[str, str, int]]: ...
    def describe_metadata_quorum(self) -> cpb.DescribeQuorumResponse: ...
    def broker_config_layers(
        self, broker: str
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]: ...
    def next_producer_id(self) -> int: ...
    def commit_records(self, records: Sequence[MetadataRecord]) -> list[tuple[str, str]]:
        """Client quotas and group configs, committed by the active controller:
        (Kafka's error name, message) per record."""
        ...

    def find_group_coordinator(self, group_id: str) -> tuple[str, int]: ...
    def find_transaction_coordinator(self, transactional_id: str) -> tuple[str, int]: ...
