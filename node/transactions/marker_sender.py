"""Writing a transaction's COMMIT/ABORT markers to its partitions' leaders (Kafka's
TransactionMarkerChannelManager): the partitions this node leads are appended here
through the replica manager; every other leader gets a WriteTxnMarkers request on its
Kafka listener (the inter-broker listener when it speaks Kafka's protocol, else the
first Kafka-protocol listener it advertises; TLS with the listener's material, and on a
SASL listener the broker's login first, as a follower's fetcher makes it), all
of them at once and beside the local appends, as Kafka's marker channel sends to
every broker together. Each marker is appended with acks=all. The outcome — NONE
once every partition has its marker, else the first error — goes to a callback; the
coordinator sends the whole set again on its next timer after a failure (a second
marker for a closed transaction changes nothing). A partition whose topic is gone
counts as done, as in Kafka. Connections are kept for the next transaction's markers, as
Kafka's channel keeps its broker connections: a new one costs a TCP connect (and a TLS
handshake and SASL login) per leader per transaction."""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.log_txns import TxnMarkerAppend
from seglog.storage.producer_state import ControlMarker

from ..event_log import EventLogger
from ..groups.offsets_records import OFFSETS_TOPIC
from ..kafka.errors import error_name
from ..kafka.sasl_exchange import sasl_exchange
from ..replica_manager import ReplicaManager
from ..security.inter_broker_sasl import InterBrokerLogin, InterBrokerLoginError
from .txn_shard import NONE, SendMarkers

_log = EventLogger("txn_markers")
_SIZE = struct.Struct(">i")
WRITE_TXN_MARKERS_VERSION = 1
MARKERS_ID = 1  # the WriteTxnMarkers request's correlation id (a login's follow it)
TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms for markers
SENDERS = 4
# Idle connections kept per leader (one per sender at most), and for how long: well
# under a listener's connections.max.idle.ms (10 min), after which it closes them.
IDLE_KEPT_S = 60.0
DONE_ANYWAY = ("UNKNOWN_TOPIC_OR_PARTITION",)  # a deleted topic needs no marker

TopicPartition = tuple[str, int]
LeaderOf = Callable[[TopicPartition], int]  # -1: no leader now
AddressOf = Callable[[int], tuple[str, int] | None]


@dataclass
class _Asked:
    """A leader's WriteTxnMarkers on its way: the connection to read the answer on,
    whether it was reused (an answer lost on one is asked again on a new one), and the
    request's bytes for that."""

    leader: int
    sock: socket.socket
    reused: bool
    request: bytes


class MarkerSender:
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        leader_of: LeaderOf,
        kafka_address_of: AddressOf,
        ssl_context: ssl.SSLContext | None = None,
        on_offsets_marker: Callable[[int, int, bool], None] = lambda _p, _pid, _c: None,
        login: InterBrokerLogin | None = None,
        login_unavailable: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.leader_of = leader_of
        self.kafka_address_of = kafka_address_of
        self.ssl_context = ssl_context
        # A marker written here to `__consumer_offsets`-p: (p, producer id, commit), for
        # the group coordinator's pending TxnOffsetCommits.
        self.on_offsets_marker = on_offsets_marker
        # The SASL login on a SASL listener; why there is none when its settings are wrong.
        self.login = login
        self.login_unavailable = login_unavailable
        self._pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="txn-markers")
        # Per leader: (address, connection, idle since), most recent last.
        self._idle: dict[int, list[tuple[tuple[str, int], socket.socket, float]]] = {}
        self._idle_lock = threading.Lock()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._idle_lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for _address, sock, _since in conns:
                sock.close()

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
        """Every leader's markers at once: the WriteTxnMarkers requests go out first,
        then this node's own partitions are appended, then the answers are read."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(m.partitions):
            by_leader.setdefault(self.leader_of(tp), []).append(tp)
        errors: list[str] = []
        asked: list[_Asked] = []
        try:
            for leader, tps in by_leader.items():
                if leader < 0:
                    errors += ["NOT_LEADER_OR_FOLLOWER"] * len(tps)
                elif leader != self.node_id:
                    one = self._ask(leader, m, tps)
                    if one is None:
                        errors += ["COORDINATOR_NOT_AVAILABLE"] * len(tps)
                    else:
                        asked.append(one)
            local = by_leader.get(self.node_id)
            if local:
                errors += self._local(m, local)
            while asked:
                errors += self._answered(asked.pop(0))
        finally:
            for one in asked:
                one.sock.close()
        failed = [e for e in errors if e != NONE and e not in DONE_ANYWAY]
        if failed:
            _log.info("txn_markers_not_written", txn=m.transactional_id, errors=sorted(set(failed)))
            return failed[0]
        return NONE

    def _local(self, m: SendMarkers, tps: list[TopicPartition]) -> list[str]:
        marker = ControlMarker("COMMIT" if m.commit else "ABORT", m.coordinator_epoch)
        append = TxnMarkerAppend(m.producer_id, m.producer_epoch, marker)
        items = [(tp, append) for tp in tps]
        started = self.replica_manager.start_produce_all(items, -1, TIMEOUT_MS)
        results = self.replica_manager.await_produced(started)
        for (topic, partition), r in zip(tps, results, strict=True):
            if r.error_name == NONE and topic == OFFSETS_TOPIC:
                self.on_offsets_marker(partition, m.producer_id, m.commit)
        return [r.error_name for r in results]

    def _ask(self, leader: int, m: SendMarkers, tps: list[TopicPartition]) -> _Asked | None:
        """Send the leader its WriteTxnMarkers (on a kept connection if there is one);
        None when the leader cannot be reached."""
        if self.login_unavailable is not None:
            _log.error("txn_markers_login_failed", leader=leader, error=self.login_unavailable)
            return None
        address = self.kafka_address_of(leader)
        if address is None:
            return None
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
        request.with_header(correlation_id=MARKERS_ID, client_id=self._client_id)
        data = bytes(request.encode(header=True, framed=True))
        kept = self._take_idle(leader, address)
        if kept is not None:
            try:
                kept.sendall(data)
                return _Asked(leader, kept, True, data)
            except OSError:
                kept.close()  # closed by the leader meanwhile: a new one below
        sock = self._connect(leader, address)
        if sock is None:
            return None
        try:
            sock.sendall(data)
        except OSError as e:
            sock.close()
            _log.info("txn_markers_unreachable", leader=leader, error=str(e))
            return None
        return _Asked(leader, sock, False, data)

    def _connect(self, leader: int, address: tuple[str, int]) -> socket.socket | None:
        """A new connection to the leader's listener, logged in; None if it failed."""
        sock: socket.socket | None = None
        try:
            sock = socket.create_connection(address, timeout=TIMEOUT_MS / 1000 + 5)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=address[0])
            if self.login is not None:
                self._log_in(sock, leader, self.login)
            return sock
        except InterBrokerLoginError as e:
            if sock is not None:
                sock.close()
            # Wrong credentials or mechanism: an operator must act, so say it loudly.
            _log.error("txn_markers_login_failed", leader=leader, error=str(e))
            return None
        except (OSError, ValueError) as e:
            if sock is not None:
                sock.close()
            _log.info("txn_markers_unreachable", leader=leader, error=str(e))
            return None

    @property
    def _client_id(self) -> str:
        return f"broker-{self.node_id}-txn-markers"

    def _log_in(self, sock: socket.socket, leader: int, login: InterBrokerLogin) -> None:
        log_in(sock, login, f"node {leader}", self._client_id, MARKERS_ID + 1)

    def _take_idle(self, leader: int, address: tuple[str, int]) -> socket.socket | None:
        now = plain_monotonic_s()
        stale: list[socket.socket] = []
        found: socket.socket | None = None
        with self._idle_lock:
            conns = self._idle.get(leader, [])
            while conns and found is None:
                at, sock, since = conns.pop()
                if at == address and now - since < IDLE_KEPT_S:
                    found = sock
                else:
                    stale.append(sock)  # the leader moved listeners, or idle too long
        for sock in stale:
            sock.close()
        return found

    def _keep(self, leader: int, sock: socket.socket) -> None:
        address = self.kafka_address_of(leader)
        with self._idle_lock:
            conns = self._idle.setdefault(leader, [])
            if address is not None and len(conns) < SENDERS:
                conns.append((address, sock, plain_monotonic_s()))
                return
        sock.close()

    def _answered(self, one: _Asked) -> list[str]:
        """The leader's answer; a kept connection that fails is replaced by a new one
        and asked again (a second marker for the same transaction changes nothing)."""
        answer = self._answer(one.leader, one.sock, quiet=one.reused)
        if answer is not None:
            self._keep(one.leader, one.sock)
            return answer
        one.sock.close()
        if one.reused:
            address = self.kafka_address_of(one.leader)
            sock = None if address is None else self._connect(one.leader, address)
            if sock is not None:
                try:
                    sock.sendall(one.request)
                except OSError as e:
                    sock.close()
                    _log.info("txn_markers_unreachable", leader=one.leader, error=str(e))
                else:
                    return self._answered(_Asked(one.leader, sock, False, one.request))
        return ["COORDINATOR_NOT_AVAILABLE"]

    def _answer(self, leader: int, sock: socket.socket, *, quiet: bool) -> list[str] | None:
        """The per-partition errors of the leader's answer; None if none came (said in
        the log unless `quiet`: a kept connection the leader closed is asked again)."""
        try:
            body = _answer_body(sock, MARKERS_ID, flexible=True)
            response = WriteTxnMarkersResponse.decode(body, version=WRITE_TXN_MARKERS_VERSION)
        except (OSError, ValueError) as e:
            if not quiet:
                _log.info("txn_markers_unreachable", leader=leader, error=str(e))
            return None
        return [
            error_name(p.error_code)
            for result in response.markers
            for t in result.topics
            for p in t.partitions
        ]


def log_in(
    sock: socket.socket, login: InterBrokerLogin, peer: str, client_id: str, first_id: int
) -> None:
    """The SASL exchange (node/kafka/sasl_exchange.py) on a blocking broker-to-broker
    connection, its requests numbered from `first_id`; InterBrokerLoginError if refused."""
    exchange = sasl_exchange(login, peer)
    step = next(exchange)
    # Bounded by the exchange's requests (two or three).
    for correlation_id in itertools.count(first_id):
        step.request.with_header(correlation_id=correlation_id, client_id=client_id)
        sock.sendall(bytes(step.request.encode(header=True, framed=True)))
        body = _answer_body(sock, correlation_id, step.flexible)
        try:
            step = exchange.send(step.response_class.decode(body, version=step.version))
        except StopIteration:
            return


def _answer_body(sock: socket.socket, correlation_id: int, flexible: bool) -> bytes:
    """The next answer's body: after response header v0 (correlation id), or v1 when
    `flexible` (plus tagged fields: none)."""
    (size,) = _SIZE.unpack(_read(sock, 4))
    frame = _read(sock, size)
    if _SIZE.unpack_from(frame)[0] != correlation_id:
        raise ValueError(f"an answer with another correlation id than {correlation_id}")
    return frame[5:] if flexible else frame[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
