"""The partitions this node hosts, following the committed metadata: produce,
fetch (a long poll), list offsets and epoch queries against their logs.

Every partition request is checked against the leader epoch the caller knows
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and against leadership
(NOT_LEADER_OR_FOLLOWER), as Kafka's ReplicaManager does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from seglog.replication.metadata_image import MetadataImage
from seglog.replication.metadata_records import MetadataRecord
from seglog.storage.errors import OffsetOutOfRangeError, StorageError
from seglog.storage.log_config import LogConfig

from .event_log import EventLogger
from .log_manager import LogManager, PartitionLog

TopicPartition = tuple[str, int]
_log = EventLogger("replica_manager")

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


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
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_name: str = "NONE"
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchSpec:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    max_bytes: int = 1 << 20


@dataclass(slots=True)
class FetchResult:
    topic: str
    partition: int
    error_name: str = "NONE"
    error_message: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    leader: tuple[int, int] = field(default=(-1, -1))


@dataclass(frozen=True, slots=True)
class OffsetResult:
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error_name: str = "NONE"
    error_message: str = ""


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self._partitions: dict[TopicPartition, HostedPartition] = {}
        self._lock = threading.Lock()
        # Bumped on every append; long-polling fetches wait for it to move.
        self._data_version = 0
        self._data_arrived = threading.Condition()

    # --- following metadata ---------------------------------------------------------

    def on_metadata(self, image: MetadataImage, records: list[MetadataRecord]) -> None:
        wanted: set[TopicPartition] = set()
        for topic in image.topics.values():
            config = self.topic_config(topic.name)
            for p, state in topic.partitions.items():
                if self.node_id not in state.replicas:
                    continue
                tp = (topic.name, p)
                wanted.add(tp)
                self._become(tp, topic.topic_id, state, config)
        with self._lock:
            gone = [tp for tp in self._partitions if tp not in wanted]
            for tp in gone:
                del self._partitions[tp]
        for tp in gone:
            self.log_manager.delete(tp)
        self._wake_fetchers()

    def _become(self, tp: TopicPartition, topic_id: str, state: object, config: LogConfig) -> None:
        from seglog.replication.metadata_image import PartitionState

        assert isinstance(state, PartitionState)
        plog = self.log_manager.get_or_create(tp, config, topic_id)
        with plog.lock:
            if plog.log.config != config:
                plog.log.config = config
            with self._lock:
                old = self._partitions.get(tp)
            if old is not None and state.partition_epoch < old.partition_epoch:
                return  # a stale update: partition epochs only rise
            new_epoch = old is None or state.leader_epoch > old.leader_epoch
            if state.leader == self.node_id and new_epoch:
                # A new leader records (epoch, LEO) before any batch of that epoch
                # exists, so it can answer epoch queries about epochs it never wrote.
                latest = plog.log.epoch_cache.latest_epoch
                if latest is None or state.leader_epoch >= latest:
                    plog.log.epoch_cache.assign(state.leader_epoch, plog.log.log_end_offset)
                if len(state.replicas) == 1:
                    plog.log.update_high_watermark(plog.log.log_end_offset)
                _log.info(
                    "became_leader",
                    topic=tp[0],
                    partition=tp[1],
                    leader_epoch=state.leader_epoch,
                    log_end_offset=plog.log.log_end_offset,
                )
            hosted = HostedPartition(
                tp,
                topic_id,
                plog,
                state.leader,
                state.leader_epoch,
                state.partition_epoch,
                state.replicas,
                state.isr,
            )
            with self._lock:
                self._partitions[tp] = hosted

    def hosted(self, tp: TopicPartition) -> HostedPartition | None:
        with self._lock:
            return self._partitions.get(tp)

    def _leader_partition(self, tp: TopicPartition, current_leader_epoch: int) -> HostedPartition:
        hp = self.hosted(tp)
        if hp is None:
            raise PartitionError(
                "UNKNOWN_TOPIC_OR_PARTITION",
                f"partition {tp[0]}-{tp[1]} is not hosted on node {self.node_id}",
            )
        if current_leader_epoch >= 0:
            if current_leader_epoch < hp.leader_epoch:
                raise PartitionError(
                    "FENCED_LEADER_EPOCH",
                    f"request epoch {current_leader_epoch} is older than {hp.leader_epoch}",
                )
            if current_leader_epoch > hp.leader_epoch:
                raise PartitionError(
                    "UNKNOWN_LEADER_EPOCH",
                    f"request epoch {current_leader_epoch} is newer than {hp.leader_epoch}",
                )
        if hp.leader != self.node_id:
            raise PartitionError(
                "NOT_LEADER_OR_FOLLOWER",
                f"node {self.node_id} is not the leader of {tp[0]}-{tp[1]} (leader {hp.leader})",
            )
        return hp

    # --- produce -------------------------------------------------------------------

    def produce(self, tp: TopicPartition, data: bytes, acks: int) -> ProduceResult:
        try:
            hp = self._leader_partition(tp, -1)
            log = hp.plog.log
            if acks == -1:
                required = min(log.config.min_insync_replicas, len(hp.replicas))
                if len(hp.isr) < required:
                    raise PartitionError(
                        "NOT_ENOUGH_REPLICAS",
                        f"ISR {list(hp.isr)} is smaller than min.insync.replicas {required}",
                    )
            with hp.plog.lock:
                info = log.append_as_leader(data, hp.leader_epoch)
                if len(hp.isr) == 1 and hp.isr[0] == self.node_id:
                    # The leader alone is the ISR: the HW is its log end offset.
                    log.update_high_watermark(log.log_end_offset)
            if not info.duplicate:
                self._wake_fetchers()
            return ProduceResult(info.first_offset, info.log_append_time, info.log_start_offset)
        except PartitionError as e:
            return ProduceResult(error_name=e.error_name, error_message=str(e))
        except StorageError as e:
            return ProduceResult(error_name=e.error_name, error_message=str(e))

    def _wake_fetchers(self) -> None:
        with self._data_arrived:
            self._data_version += 1
            self._data_arrived.notify_all()

    # --- fetch ---------------------------------------------------------------------

    def fetch(
        self,
        specs: Sequence[FetchSpec],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> list[FetchResult]:
        """Kafka's fetch: answer at once on enough bytes or any error, else wait for
        data until max_wait_ms. Bounded: at most one read per wake-up."""
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        while True:
            with self._data_arrived:
                version = self._data_version
            results = self._read(specs, replica_id, max_bytes)
            total = sum(len(r.records) for r in results)
            errors = any(r.error_name != "NONE" for r in results)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or errors or remaining <= 0 or cancelled():
                return results
            with self._data_arrived:
                if self._data_version == version:
                    self._data_arrived.wait(timeout=min(remaining, 0.5))

    def _read(
        self, specs: Sequence[FetchSpec], replica_id: int, max_bytes: int
    ) -> list[FetchResult]:
        results = []
        budget = max_bytes
        first_with_data = True
        for spec in specs:
            tp = (spec.topic, spec.partition)
            result = FetchResult(spec.topic, spec.partition)
            try:
                hp = self._leader_partition(tp, spec.current_leader_epoch)
                result.leader = (hp.leader, hp.leader_epoch)
                log = hp.plog.log
                with hp.plog.lock:
                    result.high_watermark = log.high_watermark
                    result.log_start_offset = log.log_start_offset
                    bound = log.high_watermark if replica_id < 0 else log.log_end_offset
                    limit = min(spec.max_bytes, budget)
                    if limit > 0 or first_with_data:
                        data = log.read(
                            spec.fetch_offset,
                            max(limit, 0),
                            upper_bound=bound,
                            min_one_batch=first_with_data,
                        )
                        result.records = data.records
            except PartitionError as e:
                result.error_name, result.error_message = e.error_name, str(e)
            except OffsetOutOfRangeError as e:
                result.error_name, result.error_message = "OFFSET_OUT_OF_RANGE", str(e)
            except StorageError as e:
                result.error_name, result.error_message = e.error_name, str(e)
            if result.records:
                first_with_data = False
                budget -= len(result.records)
            results.append(result)
        return results

    # --- offsets -------------------------------------------------------------------

    def list_offset(
        self, tp: TopicPartition, timestamp: int, current_leader_epoch: int, replica_id: int = -1
    ) -> OffsetResult:
        try:
            hp = self._leader_partition(tp, current_leader_epoch)
            log = hp.plog.log
            with hp.plog.lock:
                if timestamp == EARLIEST_TIMESTAMP:
                    epoch = log.epoch_cache.epoch_for_offset(log.log_start_offset)
                    return OffsetResult(log.log_start_offset, -1, -1 if epoch is None else epoch)
                last_fetchable = log.high_watermark if replica_id < 0 else log.log_end_offset
                if timestamp == LATEST_TIMESTAMP:
                    return OffsetResult(last_fetchable, -1, hp.leader_epoch)
                if timestamp == MAX_TIMESTAMP:
                    best = max((s.max_timestamp_so_far for s in log.segments), default=-1)
                    if best < 0:
                        return OffsetResult()
                    timestamp = best
                if timestamp < 0:
                    raise PartitionError(
                        "INVALID_REQUEST", f"unknown special timestamp {timestamp}"
                    )
                found = log.offset_for_timestamp(timestamp)
                if found is None or found.offset >= last_fetchable:
                    return OffsetResult()
                epoch = -1 if found.leader_epoch is None else found.leader_epoch
                return OffsetResult(found.offset, found.timestamp, epoch)
        except PartitionError as e:
            return OffsetResult(error_name=e.error_name, error_message=str(e))
        except StorageError as e:
            return OffsetResult(error_name=e.error_name, error_message=str(e))

    def end_offset_for_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int
    ) -> OffsetResult:
        """OffsetsForLeaderEpoch with KIP-279's answer (epoch, end offset)."""
        try:
            hp = self._leader_partition(tp, current_leader_epoch)
            with hp.plog.lock:
                log = hp.plog.log
                epoch, end = log.epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
            return OffsetResult(offset=end, leader_epoch=epoch)
        except PartitionError as e:
            return OffsetResult(error_name=e.error_name, error_message=str(e))
