"""The console's requests that are not shared (one viewer asked for them): a topic's
offsets and configs, groups and their lag, a partition's records, a test record,
creating a topic, resetting a group. Each goes through seglog's clients, with the
console's own security settings, and is bounded (records per page, followers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from seglog.client.admin import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Admin,
    ConfigEntry,
    GroupInformation,
    GroupListing,
    NewTopic,
    TopicDescription,
)
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError, error_class
from seglog.client.fetched_batches import ConsumerRecord
from seglog.client.group_coordinator import OffsetAndMetadata
from seglog.client.producer import Producer

from . import groups

MAX_RECORDS_PER_PAGE = 500
# The configs the topic list shows.
LIST_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes")
BROWSE_WAIT_S = 3.0
TOPIC_VISIBLE_S = 3.0
UNKNOWN_TOPIC = error_class("UNKNOWN_TOPIC_OR_PARTITION")


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class GroupDetail:
    info: GroupInformation
    rows: tuple[groups.LagRow, ...]
    exists: bool


class ClusterIO:
    def __init__(self, bootstrap: str, admin: Admin, security: Mapping[str, str | None]) -> None:
        self.bootstrap = bootstrap
        self.admin = admin
        self.security = dict(security)
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()

    def close(self) -> None:
        with self._producer_lock:
            if self._producer is not None:
                self._producer.close()
                self._producer = None

    # --- topics ----------------------------------------------------------------------

    def offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionOffsets]:
        """Log start and high watermark of each partition that has a leader."""
        start = self._offsets(tps, EARLIEST_TIMESTAMP)
        end = self._offsets(tps, LATEST_TIMESTAMP)
        return {tp: PartitionOffsets(start[tp], end[tp]) for tp in tps if tp in start and tp in end}

    def _offsets(self, tps: Sequence[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        try:
            return {
                tp: r.offset for tp, r in self.admin.list_offsets(dict.fromkeys(tps, spec)).items()
            }
        except KafkaError:
            # A partition without a leader must not hide the others: ask one by one.
            out = {}
            for tp in tps:
                try:
                    out[tp] = self.admin.list_offsets({tp: spec})[tp].offset
                except KafkaError:
                    continue
            return out

    def list_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str]]:
        """The topic list's config columns, for one page of topics in one request;
        a topic the node could not describe is left out (shown as '-')."""
        if not topics:
            return {}
        found = self.admin.describe_configs_of(topics, LIST_CONFIGS)
        return {
            t: {name: c.value for name, c in entries.items()}
            for t, entries in found.items()
            if not isinstance(entries, KafkaError)
        }

    def configs(self, topic: str) -> list[ConfigEntry]:
        return sorted(self.admin.describe_configs(topic).values(), key=lambda c: c.name)

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        self.admin.create_topics([NewTopic(name, partitions, replication_factor, dict(configs))])

    def describe_topic(self, name: str) -> TopicDescription:
        """The topic as the metadata says; one created a moment ago (here or by another
        client) reaches every node's metadata a little later, so a topic not found
        is asked again for up to TOPIC_VISIBLE_S before it is said not to exist."""
        deadline = time.monotonic() + TOPIC_VISIBLE_S
        while True:
            try:
                (described,) = self.admin.describe_topics([name])
                return described
            except KafkaError as e:
                if not isinstance(e, UNKNOWN_TOPIC) or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    # --- groups ----------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        return self.admin.list_consumer_groups()

    def group(self, group_id: str) -> GroupDetail:
        """As `seglog consumer-groups --describe`: committed offsets, the log ends
        (high watermarks) from ListOffsets, the lag between them."""
        (info,) = self.admin.describe_consumer_groups([group_id])
        committed = self.admin.list_consumer_group_offsets(group_id)
        owned = {tp for m in info.members for tp in m.member_assignment}
        existing = set(self.admin.list_topics())
        wanted = [tp for tp in owned | set(committed) if tp.topic in existing]
        ends = self._offsets(wanted, LATEST_TIMESTAMP)
        rows = groups.lag_rows(info, committed, ends)
        return GroupDetail(info, tuple(rows), info.state != "Dead" or bool(committed))

    def reset_group(
        self, group_id: str, topic: str | None, target: str, offset: int | None
    ) -> dict[TopicPartition, int]:
        """Commit new offsets for the group's partitions of `topic` (every topic it
        committed when None); refused while the group has members."""
        (info,) = self.admin.describe_consumer_groups([group_id])
        refused = groups.refuse_reset(info)
        if refused is not None:
            raise ValueError(refused)
        if topic is None:
            tps = list(self.admin.list_consumer_group_offsets(group_id))
            if not tps:
                raise ValueError(f"group {group_id!r} has no committed offsets to reset")
        else:
            (described,) = self.admin.describe_topics([topic])
            tps = [TopicPartition(topic, p.partition) for p in described.partitions]
        earliest = self._offsets(tps, EARLIEST_TIMESTAMP)
        latest = self._offsets(tps, LATEST_TIMESTAMP)
        missing = [tp for tp in tps if tp not in earliest or tp not in latest]
        if missing:
            tp = missing[0]
            raise ValueError(f"partition {tp.topic}-{tp.partition} has no leader to ask")
        new = groups.reset_offsets(target, offset, earliest, latest)
        self.admin.alter_consumer_group_offsets(
            group_id, {tp: OffsetAndMetadata(o) for tp, o in new.items()}
        )
        return new

    # --- records ---------------------------------------------------------------------

    def consumer(self) -> Consumer:
        """A consumer of no group (nothing committed), for one viewer."""
        return Consumer(
            bootstrap_servers=self.bootstrap,
            client_id="seglog-console",
            enable_auto_commit=False,
            request_timeout_ms=10_000,
            **self.security,
        )

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int:
        """The first offset at or after the timestamp; the high watermark when none."""
        found = self.admin.list_offsets({tp: timestamp_ms})[tp].offset
        if found >= 0:
            return found
        return self.admin.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset

    def browse(self, tp: TopicPartition, offset: int, limit: int) -> list[ConsumerRecord]:
        """Up to `limit` records from `offset`, stopping at the high watermark."""
        limit = min(max(limit, 1), MAX_RECORDS_PER_PAGE)
        end = self.admin.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset
        if offset >= end:
            return []
        consumer = self.consumer()
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            out: list[ConsumerRecord] = []
            deadline = time.monotonic() + BROWSE_WAIT_S
            while len(out) < limit and time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=500, max_records=limit - len(out))
                out.extend(batch.get(tp, []))
                if out and out[-1].offset + 1 >= end:
                    break
            return out
        finally:
            consumer.close(autocommit=False)

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> tuple[int, int]:
        """One record, acks=all; (partition, offset) it was written at."""
        with self._producer_lock:
            if self._producer is None:
                self._producer = Producer(self.bootstrap, acks="all", **self.security)
            producer = self._producer
        meta = producer.send(
            topic, value=value, key=key, headers=list(headers) or None, partition=partition
        ).get(timeout=30)
        return meta.partition, meta.offset
