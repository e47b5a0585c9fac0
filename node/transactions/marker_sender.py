"""Writing a transaction's COMMIT/ABORT markers to its partitions' leaders (Kafka's
TransactionMarkerChannelManager): the partitions this node leads are appended here
through the replica manager; every other leader gets a WriteTxnMarkers request on its
Kafka listener (the inter-broker listener when it speaks Kafka's protocol, else the
first Kafka-protocol listener it advertises; TLS with the listener's material). Each
marker is appended with acks=all. The outcome — NONE once every partition has its
marker, else the first error — goes to a callback; the coordinator sends the whole set
again on its next timer after a failure (a second marker for a closed transaction
changes nothing). A partition whose topic is gone counts as done, as in Kafka."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from seglog.storage.log_txns import TxnMarkerAppend
from seglog.storage.producer_state import ControlMarker

from ..event_log import EventLogger
from ..groups.offsets_records import OFFSETS_TOPIC
from ..kafka.errors import error_name
from ..replica_manager import ReplicaManager
from .txn_shard import NONE, SendMarkers

_log = EventLogger("txn_markers")
_SIZE = struct.Struct(">i")
WRITE_TXN_MARKERS_VERSION = 1
TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms for markers
SENDERS = 4
DONE_ANYWAY = ("UNKNOWN_TOPIC_OR_PARTITION",)  # a deleted topic needs no marker

TopicPartition = tuple[str, int]
LeaderOf = Callable[[TopicPartition], int]  # -1: no leader now
AddressOf = Callable[[int], tuple[str, int] | None]


class MarkerSender:
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        leader_of: LeaderOf,
        kafka_address_of: AddressOf,
        ssl_context: ssl.SSLContext | None = None,
        on_offsets_marker: Callable[[int, int, bool], None] = lambda _p, _pid, _c: None,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.leader_of = leader_of
        self.kafka_address_of = kafka_address_of
        self.ssl_context = ssl_context
        # A marker written here to `__consumer_offsets`-p: (p, producer id, commit), for
        # the group coordinator's pending TxnOffsetCommits.
        self.on_offsets_marker = on_offsets_marker
        self._pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="txn-markers")

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def send(self, markers: SendMarkers, done: Callable[[str], None]) -> None:
        def run() -> None:
            try:
                error = self._write(markers)
            except Exception:  # noqa: BLE001 - reported as a failure: the timer retries
                _log.error("txn_markers_failed", exc=True, txn=markers.transactional_id)
                error = "UNKNOWN_SERVER_ERROR"
            done(error)

        try:
            self._pool.submit(run)
        except RuntimeError:  # shut down
            pass

    def _write(self, m: SendMarkers) -> str:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(m.partitions):
            by_leader.setdefault(self.leader_of(tp), []).append(tp)
        marker = ControlMarker("COMMIT" if m.commit else "ABORT", m.coordinator_epoch)
        errors: list[str] = []
        for leader, tps in by_leader.items():
            if leader < 0:
                errors.append("NOT_LEADER_OR_FOLLOWER")
            elif leader == self.node_id:
                append = TxnMarkerAppend(m.producer_id, m.producer_epoch, marker)
                started = self.replica_manager.start_produce_all(
                    [(tp, append) for tp in tps], -1, TIMEOUT_MS
                )
                results = self.replica_manager.await_produced(started)
                for (topic, partition), r in zip(tps, results, strict=True):
                    if r.error_name == NONE and topic == OFFSETS_TOPIC:
                        self.on_offsets_marker(partition, m.producer_id, m.commit)
                errors += [r.error_name for r in results]
            else:
                errors += self._remote(leader, m, tps)
        failed = [e for e in errors if e != NONE and e not in DONE_ANYWAY]
        if failed:
            _log.info("txn_markers_not_written", txn=m.transactional_id, errors=sorted(set(failed)))
            return failed[0]
        return NONE

    def _remote(self, leader: int, m: SendMarkers, tps: list[TopicPartition]) -> list[str]:
        address = self.kafka_address_of(leader)
        if address is None:
            return ["COORDINATOR_NOT_AVAILABLE"]
        R = WriteTxnMarkersRequest
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        request = R[WRITE_TXN_MARKERS_VERSION](
            markers=[
                R.WritableTxnMarker(
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    transaction_result=m.commit,
                    topics=[
                        R.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in topics.items()
                    ],
                    coordinator_epoch=m.coordinator_epoch,
                )
            ]
        )
        try:
            response = self._exchange(address, request)
        except (OSError, ValueError) as e:
            _log.info("txn_markers_unreachable", leader=leader, error=str(e))
            return ["COORDINATOR_NOT_AVAILABLE"]
        return [
            error_name(p.error_code)
            for result in response.markers
            for t in result.topics
            for p in t.partitions
        ]

    def _exchange(self, address: tuple[str, int], request: Any) -> Any:
        request.with_header(correlation_id=1, client_id=f"broker-{self.node_id}-txn-markers")
        sock = socket.create_connection(address, timeout=TIMEOUT_MS / 1000 + 5)
        try:
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=address[0])
            sock.sendall(bytes(request.encode(header=True, framed=True)))
            (size,) = _SIZE.unpack(_read(sock, 4))
            frame = _read(sock, size)
        finally:
            sock.close()
        if _SIZE.unpack_from(frame)[0] != 1:
            raise ValueError("WriteTxnMarkers answer with another correlation id")
        # Response header v1 (flexible): correlation id, then tagged fields (none).
        return WriteTxnMarkersResponse.decode(frame[5:], version=WRITE_TXN_MARKERS_VERSION)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
