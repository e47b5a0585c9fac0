"""Raw Fetch requests for one topic-partition, answered as bytes (whole batches).

An executor task reads one offset range of one partition: it needs the batches
as the leader stores them, not a Consumer's record objects. This asks the
partition's leader (from the cluster metadata, re-asked after a leadership
error) and keeps one request in flight ahead: while the task decodes the
answer for offset X, the fetch for the offset after it is already travelling.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from seglog.client.cluster import TopicPartition, call
from seglog.client.errors import KafkaError, NodeNotReadyError
from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2

from .shared_metadata import shared_metadata


@dataclass(frozen=True)
class FetchAnswer:
    offset: int  # the fetch offset asked for
    error: str | None  # Kafka's error name, None for success
    message: str
    high_watermark: int
    log_start_offset: int
    records: bytes


@dataclass(frozen=True)
class FetchConfig:
    max_partition_fetch_bytes: int = 8 * 1024 * 1024
    fetch_max_wait_ms: int = 500
    request_timeout_ms: int = 30_000
    isolation_level: int = 0  # read_uncommitted, as Spark's Kafka source by default


class PartitionFetcher:
    def __init__(self, bootstrap_servers: str, tp: TopicPartition, config: FetchConfig) -> None:
        self.tp = tp
        self.config = config
        # Shared with the process's other tasks (and kept open after close()).
        self.metadata = shared_metadata(bootstrap_servers, config.request_timeout_ms)
        self._ahead: tuple[int, grpc.Future] | None = None

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None

    def refresh(self) -> None:
        """After a leadership error: ask the cluster who leads now."""
        self.metadata.request_update()

    def _send(self, offset: int) -> grpc.Future:
        info = self.metadata.partition(self.tp)
        if self.metadata.stale() or info is None or info.leader < 0:
            self.metadata.refresh([self.tp.topic])
            info = self.metadata.partition(self.tp)
        if info is None or info.leader < 0:
            self.metadata.request_update()
            raise NodeNotReadyError(
                f"no leader known for topic {self.tp.topic!r} partition {self.tp.partition}"
            )
        c = self.config
        request = pb.FetchRequest(
            replica_id=-1,
            max_wait_ms=c.fetch_max_wait_ms,
            min_bytes=1,
            max_bytes=c.max_partition_fetch_bytes,
            isolation_level=c.isolation_level,
            session_epoch=-1,  # no fetch session: one partition, full requests
        )
        request.topics.add(name=self.tp.topic).partitions.add(
            partition=self.tp.partition,
            current_leader_epoch=info.leader_epoch,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=c.max_partition_fetch_bytes,
        )
        timeout_s = (c.fetch_max_wait_ms + c.request_timeout_ms) / 1000
        return self.metadata.stub_for(info.leader).Fetch.future(request, timeout=timeout_s)

    def prefetch(self, offset: int) -> None:
        """Send the fetch for `offset` now; `fetch(offset)` collects it."""
        if self._ahead is None:
            try:
                self._ahead = (offset, self._send(offset))
            except KafkaError:
                pass  # fetch() sends it again and reports the error then

    def fetch(self, offset: int) -> FetchAnswer:
        """The leader's answer for `offset`. Transport failures raise a retriable
        KafkaError; partition errors come back in the answer."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] != offset:
            ahead[1].cancel()
            ahead = None
        future = ahead[1] if ahead is not None else self._send(offset)
        timeout_s = (self.config.fetch_max_wait_ms + self.config.request_timeout_ms) / 1000
        try:
            response = call(lambda _r, timeout: future.result(), None, timeout_s)
        except KafkaError:
            self.metadata.request_update()
            raise
        if response.error_code:
            return self._answer(offset, response.error_code, "fetch failed", -1, -1, b"")
        for t in response.topics:
            for p in t.partitions:
                if t.name == self.tp.topic and p.partition == self.tp.partition:
                    return self._answer(
                        offset,
                        p.error_code,
                        p.error_message,
                        p.high_watermark,
                        p.log_start_offset,
                        p.records,
                    )
        missing = "the answer does not name the partition"
        return FetchAnswer(offset, "UNKNOWN_SERVER_ERROR", missing, -1, -1, b"")

    def _answer(
        self, offset: int, code: int, message: str, hw: int, log_start: int, records: bytes
    ) -> FetchAnswer:
        error = errors_pb2.ErrorCode.Name(code) if code else None
        if error is not None and error != "OFFSET_OUT_OF_RANGE":
            self.metadata.request_update()
        return FetchAnswer(offset, error, message, hw, log_start, records)
