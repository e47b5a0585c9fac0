"""A partition this node hosts, as the data path sees it: its log and the replica
that decides for it (`seglog.replication.partition_replica`). The replica manager,
the follower fetchers and the read and produce paths all act on one."""

from __future__ import annotations

from dataclasses import dataclass

from seglog.replication import partition_replica as pr

from .log_manager import PartitionLog

TopicPartition = tuple[str, int]


class PartitionError(Exception):
    """A per-partition failure reported with Kafka's error name."""

    def __init__(self, error_name: str, message: str = "") -> None:
        super().__init__(message)
        self.error_name = error_name


@dataclass
class HostedPartition:
    tp: TopicPartition
    topic_id: str
    plog: PartitionLog
    replica: pr.PartitionReplica

    @property
    def leader(self) -> int:
        return self.replica.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.replica.leader_epoch
