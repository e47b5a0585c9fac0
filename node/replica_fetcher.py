"""A follower's fetcher: pulls every partition this node follows from one leader
node in a KIP-227 incremental fetch session.

The session makes a fetch cost what changed, not what is followed: a request carries
only the partitions whose position moved (those answered since the last request,
new ones, and ones a metadata change touched) and the leader answers only partitions
with something new. A partition the leader has not answered stays outstanding in the
session: its replica keeps its fetch in flight until the answer comes. A sweep once a
5 seconds asks every partition's replica for its next request, which catches request
timeouts; a partition in backoff is asked again every round until it ends.
Truncation requests (OffsetsForLeaderEpoch) and ListOffsets go outside the session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2
from seglog.replication import partition_replica as pr

# The replicas' timer clock (as replica_manager's): monotonic.
from seglog.storage.disk_and_clock import monotonic_ms as now_ms

from .event_log import EventLogger
from .hosted_partition import HostedPartition, TopicPartition
from .replication_throttles import ReplicationThrottles
from .security.grpc_tls import open_channel

_log = EventLogger("replica_fetcher")

FETCH_WAIT_MS = 500
FETCH_MAX_BYTES = 10 << 20
SWEEP_MS = 5_000  # a safety net: answers, metadata and backoffs mark partitions due
SESSION_ERRORS = (
    errors_pb2.ErrorCode.Value("FETCH_SESSION_ID_NOT_FOUND"),
    errors_pb2.ErrorCode.Value("INVALID_FETCH_SESSION_EPOCH"),
)
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    # A frozen leader's long poll fails in ~2 s instead of hanging.
    ("grpc.keepalive_time_ms", 1_000),
    ("grpc.keepalive_timeout_ms", 1_000),
    ("grpc.http2.ping_timeout_ms", 1_000),
    ("grpc.http2.max_pings_without_data", 0),
]


class FollowerHost(Protocol):
    """What a fetcher needs of the node's replicas (the ReplicaManager)."""

    @property
    def node_id(self) -> int: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def throttles(self) -> ReplicationThrottles: ...
    def hosted(self, tp: TopicPartition) -> HostedPartition | None: ...


# Carries out what a replica decided on an answer (ReplicaManager._carry_out).
CarryOut = Callable[[HostedPartition, Sequence[pr.Action]], None]


def error_name(code: int) -> str:
    try:
        return errors_pb2.ErrorCode.Name(code)
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"


class FetcherRounds:
    """What a fetcher does whatever its wire: the partitions it pulls and which are
    due, the session as this side knows it, each round's requests (`_collect`) and
    each answer's delivery to the replicas. ReplicaFetcher sends over gRPC from a
    thread; node/kafka/replica_client.py over Kafka's protocol from the event loop."""

    def __init__(self, manager: FollowerHost, carry_out: CarryOut, leader: int) -> None:
        self.manager = manager
        self._carry_out = carry_out
        self.leader = leader
        self._lock = threading.Lock()
        self._partitions: set[TopicPartition] = set()
        self._due: set[TopicPartition] = set()
        self._next_sweep_ms = 0
        # The session as this side knows it; touched by the sending side only.
        self._session_id = 0
        self._epoch = 0
        self._in_session: set[TopicPartition] = set()
        self._outstanding: dict[TopicPartition, tuple[HostedPartition, pr.FetchRequest]] = {}

    def _kick(self) -> None:
        """Something became due (the sending side may be waiting)."""

    def stop(self) -> None:
        raise NotImplementedError

    def set_partitions(
        self, partitions: set[TopicPartition], touched: set[TopicPartition] | None
    ) -> None:
        """The partitions this node follows from the leader; new ones and `touched`
        ones (None: all) ask for their next request."""
        with self._lock:
            new = partitions - self._partitions
            self._partitions = partitions
            self._due |= new | (partitions if touched is None else partitions & touched)
        self._kick()

    def _mark_due(self, tp: TopicPartition) -> None:
        with self._lock:
            self._due.add(tp)
        self._kick()

    def wake(self, tp: TopicPartition) -> None:
        """`tp` may send its next request now (its deferred flush is done)."""
        self._mark_due(tp)

    def _requeue(self, tp: TopicPartition) -> None:
        """Due again next round, without waking the sender (a partition in backoff or
        over its throttle: the next round comes after the sender's idle wait)."""
        with self._lock:
            self._due.add(tp)

    def _collect(
        self,
    ) -> tuple[
        list[tuple[HostedPartition, pr.FetchRequest]],
        list[tuple[HostedPartition, pr.FollowerRequest]],
        list[TopicPartition],
    ]:
        """One round's requests: the fetches, the other requests (OffsetsForLeaderEpoch,
        ListOffsets) and the partitions the session forgets."""
        t = now_ms()
        with self._lock:
            due, self._due = self._due, set()
            followed = self._partitions
        if t >= self._next_sweep_ms:
            due |= followed
            self._next_sweep_ms = t + SWEEP_MS
        fetches: list[tuple[HostedPartition, pr.FetchRequest]] = []
        others: list[tuple[HostedPartition, pr.FollowerRequest]] = []
        for tp in due:
            hp = self.manager.hosted(tp) if tp in followed else None
            if hp is None:
                continue
            if self.manager.throttles.follower_exceeded(hp):
                self._requeue(tp)  # follower.replication.throttled.rate used up: later
                continue
            with hp.plog.lock:
                if hp.replica.leader_id != self.leader:
                    # Led elsewhere now: metadata moved it after this round took its
                    # partitions. Asking next_request here would mark a request in
                    # flight that this fetcher cannot send, and the partition would
                    # wait replica.socket.timeout.ms before asking its new leader.
                    continue
                out = hp.replica.next_request(t)
                f = hp.replica.fetcher
                backing_off = out is None and f.in_flight is None and t < f.backoff_until_ms
            if backing_off:
                self._requeue(tp)
            if out is None:
                continue
            assert out.destination == self.leader, "a request for another leader"
            if isinstance(out.request, pr.FetchRequest):
                fetches.append((hp, out.request))
            else:
                others.append((hp, out.request))
        forgotten = [tp for tp in self._in_session if tp not in followed]
        for tp in forgotten:
            self._outstanding.pop(tp, None)
        for hp, req in fetches:
            self._outstanding[hp.tp] = (hp, req)
        return fetches, others, forgotten

    def _fetch_answered(
        self,
        session_id: int,
        full: bool,
        sending: list[tuple[HostedPartition, pr.FetchRequest]],
        forgotten: list[TopicPartition],
        answers: Iterable[tuple[TopicPartition, pr.FetchResponse]],
    ) -> None:
        """A session fetch's answer: the session moves on, each answered partition's
        replica takes its answer (its correlation id and offset filled in here)."""
        self._session_id = session_id
        self._epoch = 1 if full else self._epoch + 1
        self._in_session.update(hp.tp for hp, _req in sending)
        self._in_session.difference_update(forgotten)
        for tp, answer in answers:
            entry = self._outstanding.pop(tp, None)
            if entry is None:
                continue
            hp, req = entry
            self.manager.throttles.follower_fetched(hp, len(answer.records))
            self._deliver(
                hp,
                replace(answer, correlation_id=req.correlation_id, fetch_offset=req.fetch_offset),
            )

    def _fail_outstanding(self) -> None:
        """Nobody answered: every outstanding partition times out into backoff."""
        outstanding, self._outstanding = self._outstanding, {}
        self._reset_session()
        for hp, req in outstanding.values():
            self._deliver(
                hp,
                pr.FetchResponse("NOT_LEADER_OR_FOLLOWER", req.correlation_id, req.fetch_offset),
            )

    def _failed_other(self, hp: HostedPartition, req: pr.FollowerRequest) -> None:
        """An OffsetsForLeaderEpoch or ListOffsets nobody answered fails into backoff
        at once (as a fetch does) instead of staying in flight until
        replica.socket.timeout.ms."""
        failed: pr.FollowerResponse
        if isinstance(req, pr.OffsetsForLeaderEpochRequest):
            failed = pr.OffsetsForLeaderEpochResponse(
                "NOT_LEADER_OR_FOLLOWER", correlation_id=req.correlation_id
            )
        else:
            failed = pr.ListOffsetsResponse(
                "NOT_LEADER_OR_FOLLOWER", correlation_id=req.correlation_id
            )
        self._deliver(hp, failed)

    def _deliver(self, hp: HostedPartition, response: pr.FollowerResponse) -> None:
        with hp.plog.lock:
            actions = hp.replica.handle_response(response, now_ms())
        self._carry_out(hp, actions)
        self._mark_due(hp.tp)

    def _deliver_other(
        self, hp: HostedPartition, req: pr.FollowerRequest, error: str, p: Any
    ) -> None:
        """Deliver the leader's partition answer `p` (its error named `error`) to an
        OffsetsForLeaderEpoch or ListOffsets request: gRPC's and Kafka's answers have
        the same fields."""
        answer: pr.FollowerResponse
        if isinstance(req, pr.OffsetsForLeaderEpochRequest):
            answer = pr.OffsetsForLeaderEpochResponse(
                error, p.leader_epoch, p.end_offset, req.correlation_id
            )
        else:
            answer = pr.ListOffsetsResponse(
                error, p.offset, p.timestamp, p.leader_epoch, req.correlation_id
            )
        self._deliver(hp, answer)

    def _reset_session(self) -> None:
        self._session_id, self._epoch = 0, 0
        self._in_session.clear()


class ReplicaFetcher(FetcherRounds):
    def __init__(
        self,
        manager: FollowerHost,
        carry_out: CarryOut,
        leader: int,
        address: tuple[str, int],
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        super().__init__(manager, carry_out, leader)
        self._channel = open_channel(f"{address[0]}:{address[1]}", CHANNEL_OPTIONS, credentials)
        self._stub = client_pb2_grpc.SegLogStub(self._channel)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"fetcher-{leader}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._channel.close()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self._round():
                    self._stopped.wait(0.05)
            except grpc.RpcError:
                self._stopped.wait(0.2)  # the leader is down or moved: metadata will tell
            except Exception:  # noqa: BLE001 - keep fetching; log and back off
                if self._stopped.is_set():
                    return  # stopped mid-round: its channel is closed
                _log.error("fetcher_failed", exc=True, leader=self.leader)
                self._reset_session()
                self._stopped.wait(0.5)

    def _round(self) -> bool:
        """One round of requests; False when there was nothing to send."""
        fetches, others, forgotten = self._collect()
        for hp, req in others:
            self._send_other(hp, req)
        if fetches or forgotten or self._outstanding:
            self._send_fetch(fetches, forgotten)
            return True
        return bool(others)

    def _send_fetch(
        self,
        fetches: list[tuple[HostedPartition, pr.FetchRequest]],
        forgotten: list[TopicPartition],
    ) -> None:
        full = self._session_id == 0
        # A new session starts with a full fetch of everything outstanding.
        sending = list(self._outstanding.values()) if full else fetches
        request = pb.FetchRequest(
            replica_id=self.manager.node_id,
            replica_epoch=self.manager.broker_epoch,
            max_wait_ms=FETCH_WAIT_MS,
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES,
            topics=_topics(sending),
            session_id=self._session_id,
            session_epoch=self._epoch,
        )
        if not full:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in forgotten:
                by_topic.setdefault(topic, []).append(partition)
            request.forgotten.extend(
                pb.FetchTopic(name=t, partitions=[pb.FetchPartition(partition=p) for p in ps])
                for t, ps in by_topic.items()
            )
        try:
            response = self._stub.Fetch(request, timeout=FETCH_WAIT_MS / 1000 + 10)
        except grpc.RpcError:
            self._fail_outstanding()
            raise
        if response.error_code in SESSION_ERRORS:
            _log.info(
                "fetch_session_reset", leader=self.leader, error=error_name(response.error_code)
            )
            self._reset_session()  # the next round opens a new one with a full fetch
            return
        if response.error_code:
            raise grpc.RpcError(f"fetch failed: {error_name(response.error_code)}")
        self._fetch_answered(
            response.session_id,
            full,
            sending,
            forgotten,
            (
                (
                    (t.name, p.partition),
                    pr.FetchResponse(
                        error_name(p.error_code),
                        0,
                        0,
                        p.high_watermark,
                        p.log_start_offset,
                        p.records,
                        pr.EpochEndOffset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
                        if p.HasField("diverging_epoch")
                        else None,
                    ),
                )
                for t in response.topics
                for p in t.partitions
            ),
        )

    def _send_other(self, hp: HostedPartition, req: pr.FollowerRequest) -> None:
        try:
            self._send_other_rpc(hp, req)
        except grpc.RpcError:
            self._failed_other(hp, req)
            raise

    def _send_other_rpc(self, hp: HostedPartition, req: pr.FollowerRequest) -> None:
        topic, partition = hp.tp
        # The RPC, its request's messages (request, topic, partition) and its own field.
        messages: tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]
        if isinstance(req, pr.OffsetsForLeaderEpochRequest):
            rpc = self._stub.OffsetsForLeaderEpoch
            messages = (
                pb.OffsetsForLeaderEpochRequest,
                pb.OffsetForLeaderTopic,
                pb.OffsetForLeaderPartition,
            )
            field = {"leader_epoch": req.leader_epoch}
        elif isinstance(req, pr.ListOffsetsRequest):
            rpc = self._stub.ListOffsets
            messages = (pb.ListOffsetsRequest, pb.ListOffsetsTopic, pb.ListOffsetsPartition)
            field = {"timestamp": req.timestamp}
        else:
            return
        p = self._ask_one(
            rpc,
            *messages,
            topic,
            partition=partition,
            current_leader_epoch=req.current_leader_epoch,
            **field,
        )
        self._deliver_other(hp, req, error_name(p.error_code), p)

    def _ask_one(
        self,
        rpc: Callable[..., Any],
        request: Callable[..., Any],
        topic_entry: Callable[..., Any],
        partition_entry: Callable[..., Any],
        topic: str,
        **fields: int,
    ) -> Any:
        """A one-partition request to the leader; its partition's answer."""
        r = rpc(
            request(
                replica_id=self.manager.node_id,
                topics=[topic_entry(name=topic, partitions=[partition_entry(**fields)])],
            ),
            timeout=10,
        )
        return r.topics[0].partitions[0]


def _topics(fetches: list[tuple[HostedPartition, pr.FetchRequest]]) -> list[pb.FetchTopic]:
    by_topic: dict[str, list[pb.FetchPartition]] = {}
    for hp, req in fetches:
        by_topic.setdefault(hp.tp[0], []).append(
            pb.FetchPartition(
                partition=hp.tp[1],
                current_leader_epoch=req.current_leader_epoch,
                fetch_offset=req.fetch_offset,
                last_fetched_epoch=req.last_fetched_epoch,
                log_start_offset=req.log_start_offset,
                partition_max_bytes=req.max_bytes,
            )
        )
    return [pb.FetchTopic(name=t, partitions=ps) for t, ps in by_topic.items()]


# Makes the fetcher of one leader: (replicas, carry_out, leader id, its address).
NewFetcher = Callable[[FollowerHost, CarryOut, int, tuple[str, int]], FetcherRounds]


def grpc_fetcher(credentials: grpc.ChannelCredentials | None) -> NewFetcher:
    """Followers fetch over gRPC (replica.fetch.protocol=grpc); None: plaintext."""

    def new(
        manager: FollowerHost, carry_out: CarryOut, leader: int, address: tuple[str, int]
    ) -> FetcherRounds:
        return ReplicaFetcher(manager, carry_out, leader, address, credentials)

    return new
