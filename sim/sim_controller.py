"""The controller the replication simulator's nodes talk to: production's decisions
(`cluster_control`) over a `MetadataImage`, each decision committed as one metadata-log
entry through the quorum controller's codec (`encode_entry` / `decode_entry`) and applied
as every node applies it. A quorum of one that never fails: the Raft quorum under it is
what `raft_sim` checks. No copy of a rule lives here — only the simulator's vocabulary
(partition numbers of its one topic, `SendAlterPartition` in, `AlterPartitionResponse`
out) translated to and from production's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from seglog.controller.cluster_control import (
    IsrChange,
    alter_partitions_records,
    create_topic_records,
    fence_broker_records,
    next_broker_epoch,
    register_broker_records,
    unfence_broker_records,
)
from seglog.controller.metadata_image import MetadataImage, PartitionState
from seglog.controller.metadata_records import (
    BrokerFenceRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    decode_entry,
    encode_entry,
)
from seglog.replication.partition_replica import AlterPartitionResponse, SendAlterPartition
from seglog.storage.log_config import LogConfig

TOPIC = "sim"
TOPIC_ID = "sim-topic-id"


class SimController:
    def __init__(
        self,
        node_ids: Sequence[int],
        partitions: int,
        replication_factor: int,
        unclean: bool,
        rng: random.Random,
    ) -> None:
        self.image = MetadataImage()
        self.defaults = LogConfig.defaults()
        self.offset = 0  # entries committed: the metadata log's end
        for b in node_ids:
            epoch = self.register(b)
            self._commit([BrokerFenceRecord(b, epoch, False)])
        configs = {"unclean.leader.election.enable": "true"} if unclean else {}
        self._commit(
            create_topic_records(
                self.image,
                TOPIC,
                partitions,
                replication_factor,
                configs,
                broker_defaults=self.defaults,
                new_topic_id=lambda: TOPIC_ID,
                rng=rng,
            )
        )

    def _commit(self, records: list[MetadataRecord]) -> bool:
        """One entry of the metadata log, through its codec, applied to the image."""
        if not records:
            return False
        for record in decode_entry(encode_entry(records)):
            self.image.apply(record)
        self.offset += 1
        return True

    # --- what the simulator reads -----------------------------------------------------

    @property
    def partitions(self) -> dict[int, PartitionState]:
        return dict(self.image.topics[TOPIC].partitions)

    @property
    def fenced(self) -> set[int]:
        return {b for b, r in self.image.brokers.items() if r.fenced}

    @property
    def broker_epochs(self) -> dict[int, int]:
        return {b: r.broker_epoch for b, r in self.image.brokers.items()}

    def alive_epochs(self) -> dict[int, int]:
        return {b: r.broker_epoch for b, r in self.image.brokers.items() if not r.fenced}

    # --- requests ------------------------------------------------------------------

    def fence(self, broker_id: int) -> bool:
        return self._commit(fence_broker_records(self.image, broker_id, self.defaults))

    def unfence(self, broker_id: int) -> bool:
        return self._commit(unfence_broker_records(self.image, broker_id, self.defaults))

    def register(self, broker_id: int) -> int:
        """A new incarnation: its broker epoch (it starts fenced; the old one is out)."""
        epoch = next_broker_epoch(self.image, broker_id, self.offset)
        record = RegisterBrokerRecord(broker_id, epoch, f"node{broker_id}", 0, None)
        self._commit(register_broker_records(self.image, record, self.defaults))
        return epoch

    def alter_partitions(
        self,
        broker_id: int,
        broker_epoch: int,
        batch: Sequence[tuple[int, SendAlterPartition]],
    ) -> list[tuple[int, AlterPartitionResponse]]:
        """One AlterPartition request; raises ControlError when the whole request is
        refused (STALE_BROKER_EPOCH), as the controller servicer answers."""
        changes = [
            IsrChange(TOPIC, p, r.leader_epoch, r.partition_epoch, r.new_isr, r.broker_epochs)
            for p, r in batch
        ]
        records, answers = alter_partitions_records(self.image, broker_id, broker_epoch, changes)
        self._commit(records)
        out = []
        for (p, request), (error, _message) in zip(batch, answers, strict=True):
            state = self.image.topics[TOPIC].partitions[p]
            response = AlterPartitionResponse(
                error, request.request_id, state.leader_epoch, state.partition_epoch, state.isr
            )
            out.append((p, response))
        return out
