"""The consumer's ListOffsets (Kafka's OffsetFetcher): offsets by timestamp, asked of
each partition's leader, once or until every partition answered."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from seglog.proto import client_pb2 as pb

from .backoff import Backoff
from .cluster import ClusterMetadata, TopicPartition, call
from .errors import KafkaError, KafkaTimeoutError, error_class, for_code


class OffsetFetcher:
    def __init__(
        self,
        metadata: ClusterMetadata,
        backoff: Backoff,
        request_timeout_s: float,
        topics_of_interest: Callable[[], set[str] | None],
        isolation_level: int = 0,
    ) -> None:
        self.metadata = metadata
        # 1 (read_committed): the latest offset is the last stable offset (the LSO).
        self.isolation_level = isolation_level
        self.backoff = backoff
        self.request_timeout_s = request_timeout_s
        # The topics a metadata refresh asks for besides the partitions' own (None: all).
        self.topics_of_interest = topics_of_interest

    def list_offsets_once(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, KafkaError]]:
        """One ListOffsets per leader; (offset, timestamp) per partition, or its error."""
        rpc_timeout_s = self.request_timeout_s if timeout_s is None else timeout_s
        results: dict[TopicPartition, tuple[int, int]] = {}
        failures: dict[TopicPartition, KafkaError] = {}
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        for tp, ts in timestamps.items():
            info = self.metadata.partition(tp)
            if info is None or info.leader < 0:
                self.metadata.request_update()
                failures[tp] = self.metadata.topic_error(tp.topic) or error_class(
                    "LEADER_NOT_AVAILABLE"
                )(f"no known leader for {tp.topic}-{tp.partition}")
                continue
            by_node.setdefault(info.leader, []).append((tp, ts, info.leader_epoch))
        for node_id, parts in by_node.items():
            request = pb.ListOffsetsRequest(replica_id=-1, isolation_level=self.isolation_level)
            topics: dict[str, pb.ListOffsetsTopic] = {}
            for tp, ts, epoch in parts:
                t = topics.get(tp.topic)
                if t is None:
                    t = topics[tp.topic] = request.topics.add(name=tp.topic)
                t.partitions.add(partition=tp.partition, current_leader_epoch=epoch, timestamp=ts)
            try:
                stub = self.metadata.stub_for(node_id)
                response = call(stub.ListOffsets, request, rpc_timeout_s)
            except KafkaError as e:
                self.metadata.request_update()
                for tp, _ts, _epoch in parts:
                    failures[tp] = e
                continue
            asked = {tp for tp, _ts, _epoch in parts}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition)
                    if tp not in asked:
                        continue
                    asked.discard(tp)
                    if p.error_code:
                        failures[tp] = for_code(
                            p.error_code, f"{tp.topic}-{tp.partition}: {p.error_message}"
                        )
                    else:
                        results[tp] = (p.offset, p.timestamp)
            for tp in asked:
                failures[tp] = KafkaError(f"node {node_id} did not answer for {tp}")
        return results, failures

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets until every partition answered or the deadline passed."""
        deadline = time.monotonic() + timeout_s
        remaining = dict(timestamps)
        results: dict[TopicPartition, tuple[int, int]] = {}
        attempt = 0
        while remaining:
            if any(self.metadata.leader_for(tp) < 0 for tp in remaining):
                self.metadata.request_update()
            if self.metadata.stale():
                try:
                    self.metadata.refresh(self._topics_with(remaining))
                except KafkaError:
                    pass  # recorded below as the partitions' failures
            rpc_timeout_s = min(self.request_timeout_s, max(deadline - time.monotonic(), 0.01))
            got, failures = self.list_offsets_once(remaining, rpc_timeout_s)
            results.update(got)
            for tp in got:
                del remaining[tp]
            fatal = [e for e in failures.values() if not e.retriable]
            if fatal:
                raise fatal[0]
            if not remaining:
                break
            attempt += 1
            delay = self.backoff.delay(attempt)
            if time.monotonic() + delay >= deadline:
                detail = "; ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in failures.items())
                raise KafkaTimeoutError(f"offsets not found within {timeout_s:.1f}s ({detail})")
            time.sleep(delay)
        return results

    def _topics_with(self, tps: Iterable[TopicPartition]) -> set[str]:
        interest = self.topics_of_interest()
        return {tp.topic for tp in tps} | (interest or set())
