"""The controller's request surface, shared by the quorum of one (`LocalController`)
and the Raft quorum (`QuorumController`): each request is a pure decision from
`seglog.controller.cluster_control` against the applied image, handed to the
subclass's `_op`, which commits the records one operation at a time."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager

from seglog.controller.cluster_control import (
    IsrChange,
    allocate_producer_ids,
    alter_broker_config_records,
    alter_config_records,
    alter_partitions_records,
    create_partitions_records,
    create_topic_records,
    delete_topic_records,
    elect_leaders_records,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord
from seglog.controller.reassignment import (
    OngoingReassignment,
    alter_reassignments_records,
    list_reassignments,
)
from seglog.controller.security_control import security_records
from seglog.node.event_log import EventLogger
from seglog.storage.log_config import LogConfig
from seglog.storage.partition_metadata import new_topic_id

_log = EventLogger("controller")
Decision = Callable[[MetadataImage], list[MetadataRecord]]
# Told of every change a controller applies: the image after it and its records.
Listener = Callable[[MetadataImage, list[MetadataRecord]], None]


class ControllerRequests:
    image: MetadataImage
    broker_defaults: LogConfig
    rng: random.Random
    # Held while reading the image from request threads.
    _image_lock: AbstractContextManager[object]

    def _op(self, decide: Decision) -> object:
        """Decide against the applied image and commit the records, serialised with
        every other operation so each decision sees the earlier ones."""
        raise NotImplementedError

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        validate_only: bool = False,
        assignments: Sequence[tuple[int, Sequence[int]]] = (),
    ) -> str:
        topic_id: list[str] = []

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records = create_topic_records(
                image,
                name,
                num_partitions,
                replication_factor,
                configs,
                broker_defaults=self.broker_defaults,
                new_topic_id=new_topic_id,
                rng=self.rng,
                assignments=assignments,
            )
            topic_id.append(records[0].topic_id)  # type: ignore[union-attr]
            return [] if validate_only else records

        self._op(decide)
        if not validate_only:
            _log.info("topic_created", topic=name, partitions=num_partitions, rf=replication_factor)
        return topic_id[0]

    def create_partitions(
        self,
        name: str,
        total_count: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records = create_partitions_records(image, name, total_count, self.rng, assignments)
            return [] if validate_only else records

        self._op(decide)
        if not validate_only:
            _log.info("partitions_created", topic=name, partitions=total_count)

    def elect_leaders(
        self, election: str, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str]:
        """KIP-460's election; per partition NONE or Kafka's error name."""
        results: dict[tuple[str, int], str] = {}

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records, decided = elect_leaders_records(image, election, partitions)
            results.update(decided)
            return records

        self._op(decide)
        elected = sorted(k for k, v in results.items() if v == "NONE")
        if elected:
            _log.info("leaders_elected", election=election, partitions=len(elected))
        return results

    def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, tuple[int, ...] | None]]
    ) -> dict[tuple[str, int], tuple[str, str]]:
        """KIP-455: start (a target replica set) or cancel (None) reassignments; per
        partition (Kafka's error name, message)."""
        results: dict[tuple[str, int], tuple[str, str]] = {}

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records, decided = alter_reassignments_records(image, requests)
            results.update(decided)
            return records

        self._op(decide)
        started = sorted(k for k, v in results.items() if v[0] == "NONE")
        if started:
            _log.info("reassignments_altered", partitions=len(started))
        return results

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[OngoingReassignment]:
        with self._image_lock:
            return list_reassignments(self.image, partitions)

    def delete_topic(self, name: str) -> None:
        self._op(lambda image: delete_topic_records(image, name))
        _log.info("topic_deleted", topic=name)

    def alter_configs(
        self, topic: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records = alter_config_records(
                image, topic, changes, broker_defaults=self.broker_defaults
            )
            return [] if validate_only else records

        self._op(decide)

    def alter_broker_configs(
        self, broker: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Dynamic broker configs of one broker (its id) or the cluster default ("")."""

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records = alter_broker_config_records(image, broker, changes)
            return [] if validate_only else records

        self._op(decide)
        if not validate_only:
            _log.info("broker_configs_altered", broker=broker or "<default>", names=sorted(changes))

    def alter_partitions(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> list[tuple[str, str]]:
        """A leader's pending ISR changes (Kafka's batched AlterPartition), committed as
        one entry; (error name, message) per change, NONE for an accepted one. A stale
        sender (STALE_BROKER_EPOCH) fails the whole request."""
        answers: list[tuple[str, str]] = []

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records, decided = alter_partitions_records(image, broker_id, broker_epoch, changes)
            answers[:] = decided
            return records

        self._op(decide)
        assert len(answers) == len(changes)
        return answers

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """[first, end) producer ids for a broker."""
        first: list[int] = []

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            start, records = allocate_producer_ids(image, broker_id, broker_epoch)
            first.append(start)
            return records

        self._op(decide)
        return first[0], self.image.next_producer_id

    def commit_security(self, proposed: Sequence[MetadataRecord]) -> list[tuple[str, str]]:
        """SCRAM credentials and ACL entries (seglog.controller.security_control)."""
        results: list[tuple[str, str]] = []

        def decide(image: MetadataImage) -> list[MetadataRecord]:
            records, results[:] = security_records(image, proposed)
            return records

        self._op(decide)
        return results

    def topic_config(self, name: str) -> LogConfig:
        with self._image_lock:
            return self.broker_defaults.with_overrides(self.image.configs.get(name, {}))


__all__ = ["ControllerRequests", "Decision", "IsrChange"]
