"""The controller quorum's I/O shell: a Raft core (`seglog.controller.raft`) driven
by one thread that ticks it, steps inbound messages, persists each Ready
(`RaftStorage`), sends its messages (`PeerSender`) and applies committed
metadata records to the image. The active controller (the Raft leader) turns
requests into records with the pure functions of `cluster_control`, proposes
them and answers once they are committed; it also fences brokers whose
heartbeats stop and moves their leaderships.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import grpc

from seglog.controller.broker_sessions import BrokerSessions
from seglog.controller.cluster_control import (
    METADATA_TOPIC,
    ControlError,
    fence_broker_records,
    next_broker_epoch,
    preferred_leader_records,
    register_broker_records,
    unfence_broker_records,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    MetadataRecord,
    RegisterBrokerRecord,
    decode_entry,
    encode_entry,
)
from seglog.controller.raft import Message, NotLeaderError, PersistentState, RaftNode, Role
from seglog.node.controller.controller_requests import ControllerRequests, Decision, Listener
from seglog.node.controller.raft_storage import RaftStorage
from seglog.node.controller.raft_transport import PeerSender
from seglog.node.event_log import EventLogger
from seglog.storage.disk_and_clock import plain_monotonic_s, plain_wall_s
from seglog.storage.log_config import LogConfig

_log = EventLogger("controller")

TICK_S = 0.05  # idle cost: each tick wakes the Raft thread
DEFAULT_ELECTION_TIMEOUT_MS = 1_000  # Kafka's controller.quorum.election.timeout.ms
SNAPSHOT_EVERY = 2_000  # applied entries between metadata snapshots
COMMIT_TIMEOUT_S = 10.0
INBOUND_LIMIT = 10_000


class QuorumController(ControllerRequests):
    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        metadata_dir: Path,
        broker_defaults: LogConfig,
        rng: random.Random,
        session_timeout_ms: int = 9_000,
        auto_leader_rebalance: bool = True,
        rebalance_interval_ms: int = 300_000,
        election_timeout_ms: int = DEFAULT_ELECTION_TIMEOUT_MS,
        channel_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.node_id = node_id
        self.channel_credentials = channel_credentials  # Raft between voters; None: plaintext
        self.voters = dict(voters)
        self.metadata_dir = metadata_dir
        self.broker_defaults = broker_defaults
        self.rng = rng
        self.session_timeout_s = session_timeout_ms / 1000
        # Randomised in [T, 2T) by the core; heartbeats about 5 times per timeout, so
        # a follower starts an election only after missing several in a row.
        self.election_ticks = max(2, round(election_timeout_ms / 1000 / TICK_S))
        self.heartbeat_ticks = max(1, self.election_ticks // 5)
        self.auto_leader_rebalance = auto_leader_rebalance
        self.rebalance_interval_s = rebalance_interval_ms / 1000
        self.image = MetadataImage()
        self.metadata_offset = 0  # last applied Raft index
        self.published_offset = 0  # the last index whose records listeners were given
        self._listeners: list[Listener] = []
        self._unpublished: list[MetadataRecord] = []  # applied, not yet given to listeners
        # Listeners added while records were applied but not yet published: their first
        # image (a snapshot) waits for that publication, or they would get those
        # records twice (in the snapshot, then as a delta).
        self._awaiting_snapshot: list[Listener] = []
        self._inbound: queue.Queue[tuple[str, object]] = queue.Queue(INBOUND_LIMIT)
        self._pending: dict[int, tuple[int, Future[int]]] = {}
        # Proposals are queued under it, and `shutdown` closes the queue under it: none
        # is left in the queue for a Raft thread that is gone.
        self._propose_lock = threading.Lock()
        self._closed = False
        # The proposals whose requests wait for their commit; notified as each ends.
        self._proposals: set[Future[int]] = set()
        self._proposal_ended = threading.Condition(self._propose_lock)
        self._op_lock = threading.Lock()
        self._state_lock = threading.Lock()  # image + listeners, read by request threads
        self._image_lock = self._state_lock
        self._stopped = threading.Event()
        self._peers: dict[int, PeerSender] = {}
        self._storage: RaftStorage | None = None
        self._raft: RaftNode | None = None
        self._thread: threading.Thread | None = None
        self._duty_thread: threading.Thread | None = None
        self._leader_ready_index = -1
        self._former_leader: int | None = None  # the last other voter known to lead
        self._sessions = BrokerSessions(self.session_timeout_s)  # monotonic clock
        self._last_heard: dict[int, float] = {}  # voter id -> last Raft message (monotonic)
        # voter id -> when it last held the leader's last index (monotonic; leader only)
        self._caught_up: dict[int, float] = {}
        self._registered_at: dict[int, int] = {}  # broker id -> index of its registration
        # What request threads may read without touching the core.
        self.role = Role.FOLLOWER.value
        self.term = 0
        self.leader_id: int | None = None
        self.commit_index = 0

    # --- lifecycle -------------------------------------------------------------------

    def load(self, clean: bool) -> None:
        self._storage = RaftStorage(self.metadata_dir / f"{METADATA_TOPIC}-0", clean)
        persisted: PersistentState = self._storage.load()
        if persisted.snapshot is not None:
            for record in decode_entry(persisted.snapshot.data):
                self.image.apply(record)
            self.metadata_offset = persisted.snapshot.index
        self._raft = RaftNode(
            self.node_id,
            sorted(self.voters),
            persisted=persisted,
            election_ticks=self.election_ticks,
            heartbeat_ticks=self.heartbeat_ticks,
            rng=self.rng,
        )
        self.term = persisted.term
        _log.info(
            "quorum_loaded",
            term=persisted.term,
            entries=len(persisted.entries),
            snapshot=persisted.snapshot.index if persisted.snapshot else 0,
            voters=sorted(self.voters),
        )

    def start(self) -> None:
        for peer, address in self.voters.items():
            if peer != self.node_id:
                self._peers[peer] = PeerSender(peer, address, self.channel_credentials)
        self._thread = threading.Thread(target=self._run, name="raft", daemon=True)
        self._thread.start()
        self._duty_thread = threading.Thread(target=self._duties, name="controller", daemon=True)
        self._duty_thread.start()

    def begin_shutdown(self) -> None:
        """The first step of a shutdown, before the listener stops: no more duties.
        Heartbeats will not reach this controller any more, so it must not judge
        sessions by them (controller/broker_sessions.py)."""
        self._sessions.begin_shutdown()

    def close_proposals(self, drain_s: float) -> None:
        """Refuse new proposals (NOT_CONTROLLER: the broker asks another voter) and
        wait, at most `drain_s`, for the ones made to be committed or fail. Before the
        listener stops: the peers' acknowledgements arrive through it, and without them
        a request waiting for its commit (another broker's controlled shutdown, sent to
        this active controller) held the listener's graceful stop for its whole grace,
        then failed, and that broker looked for the next controller."""
        with self._proposal_ended:
            self._closed = True
            self._proposal_ended.wait_for(lambda: not self._proposals, drain_s)

    def shutdown(self) -> None:
        self.begin_shutdown()
        self._stopped.set()
        for t in (self._thread, self._duty_thread):
            if t is not None:
                t.join(timeout=5)
        for p in self._peers.values():
            p.close()
        # A request that proposed after the Raft thread's last pass (a broker's
        # controlled shutdown arrives just then) must not wait out COMMIT_TIMEOUT_S:
        # its gRPC thread would hold this process's exit that long.
        with self._propose_lock:
            self._closed = True
            self._fail_queued()
        self._fail_pending("NOT_CONTROLLER", "the controller is shutting down")
        if self._storage is not None:
            self._storage.close()
            self._storage = None

    def add_listener(self, listener: Listener) -> None:
        with self._state_lock:
            self._listeners.append(listener)
            if self._unpublished:
                self._awaiting_snapshot.append(listener)
            else:
                listener(self.image, [])

    def remove_listener(self, listener: Listener) -> None:
        with self._state_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
            if listener in self._awaiting_snapshot:
                self._awaiting_snapshot.remove(listener)

    # --- the Raft thread ---------------------------------------------------------------

    def deliver(self, message: Message) -> None:
        """A Raft message from a peer (gRPC thread); dropped when the queue is full."""
        with contextlib.suppress(queue.Full):
            self._inbound.put_nowait(("message", message))

    def _run(self) -> None:
        assert self._raft is not None and self._storage is not None
        raft = self._raft
        next_tick = plain_monotonic_s() + TICK_S
        while not self._stopped.is_set():
            timeout = max(0.0, next_tick - plain_monotonic_s())
            try:
                kind, payload = self._inbound.get(timeout=timeout)
                self._handle(kind, payload)
                # Drain what else arrived, bounded, before persisting once.
                for _ in range(256):
                    kind, payload = self._inbound.get_nowait()
                    self._handle(kind, payload)
            except queue.Empty:
                pass
            if plain_monotonic_s() >= next_tick:
                raft.tick()
                next_tick += TICK_S
                if next_tick < plain_monotonic_s():
                    next_tick = plain_monotonic_s() + TICK_S
            self._process_ready()

    def _handle(self, kind: str, payload: object) -> None:
        assert self._raft is not None
        if kind == "message":
            src = payload.src  # type: ignore[attr-defined]
            self._last_heard[src] = plain_monotonic_s()
            self._raft.step(payload)  # type: ignore[arg-type]
            if self._raft.match_indexes().get(src, -1) >= self._raft.last_index:
                self._caught_up[src] = plain_monotonic_s()
        elif kind == "propose":
            data, future = payload  # type: ignore[misc]
            try:
                index = self._raft.propose(data)
                self._pending[index] = (self._raft.term, future)
            except NotLeaderError as e:
                future.set_exception(ControlError("NOT_CONTROLLER", str(e)))
        elif kind == "compact":
            index, data = payload  # type: ignore[misc]
            if index > self._raft.snapshot_index:
                self._raft.compact(index, data)
                assert self._storage is not None
                self._storage.compact_to(index)

    def _process_ready(self) -> None:
        raft, storage = self._raft, self._storage
        assert raft is not None and storage is not None
        # Bounded: each Ready drains what the core had queued.
        for _ in range(64):
            if not raft.has_ready():
                break
            rd = raft.ready()
            storage.persist(rd)  # durable before any message leaves (votes, acks)
            for m in rd.messages:
                peer = self._peers.get(m.dst)
                if peer is not None:
                    peer.send(m)
            for entry in rd.committed_entries:
                self._apply(entry.index, entry.term, entry.data)
            raft.advance(rd)
        was_leader = self.role == Role.LEADER.value
        if raft.leader_id is not None and raft.leader_id != self.node_id:
            self._former_leader = raft.leader_id
        self.role, self.term = raft.role.value, raft.term
        self.leader_id, self.commit_index = raft.leader_id, raft.commit_index
        if raft.role == Role.LEADER and not was_leader:
            self._leader_ready_index = raft.last_index
            former = self._former_leader
            self._sessions.activate(
                self.image.brokers,
                plain_monotonic_s(),
                former,
                None if former is None else self._last_heard.get(former),
            )
            _log.info("became_active_controller", term=raft.term, node=self.node_id)
        elif raft.role != Role.LEADER and was_leader:
            self._fail_pending("NOT_CONTROLLER", "leadership lost")
            _log.info("lost_controller_leadership", term=raft.term, leader=raft.leader_id)

    def _apply(self, index: int, term: int, data: bytes) -> None:
        records = decode_entry(data)
        # Publish only once caught up with the commit index: a restarting node
        # replays its whole log, and acting on every intermediate state would
        # make it, e.g., lead again at an epoch its own log has passed.
        assert self._raft is not None
        published: list[MetadataRecord] = []
        with self._state_lock:
            for r in records:
                self.image.apply(r)
                if isinstance(r, RegisterBrokerRecord):
                    self._registered_at[r.broker_id] = index
            self.metadata_offset = index
            # Under the lock with the image, so add_listener sees the image and the
            # unpublished records together.
            self._unpublished.extend(records)
            if self._unpublished and index >= self._raft.commit_index:
                published, self._unpublished = self._unpublished, []
                self.published_offset = index
                fresh, self._awaiting_snapshot = self._awaiting_snapshot, []
            listeners = list(self._listeners)
        if published:
            for listener in listeners:
                try:
                    # A listener added during the replay gets its first image now.
                    listener(self.image, [] if listener in fresh else published)
                except Exception:  # noqa: BLE001 - a listener must not stop the quorum
                    _log.error("metadata_listener_failed", exc=True, index=index)
        pending = self._pending.pop(index, None)
        if pending is not None:
            proposed_term, future = pending
            if proposed_term == term:
                future.set_result(index)
            else:
                future.set_exception(
                    ControlError("NOT_CONTROLLER", "a new leader replaced the entry")
                )
        if index % SNAPSHOT_EVERY == 0:
            with self._state_lock:
                snapshot = encode_entry(self.image.to_records())
            # Compacted between Readies, never in the middle of one.
            with contextlib.suppress(queue.Full):
                self._inbound.put_nowait(("compact", (index, snapshot)))

    def _fail_queued(self) -> None:
        """Fail the proposals still queued (the Raft thread has stopped)."""
        while True:
            try:
                kind, payload = self._inbound.get_nowait()
            except queue.Empty:
                return
            if kind == "propose":
                _data, future = payload  # type: ignore[misc]
                future.set_exception(
                    ControlError("NOT_CONTROLLER", "the controller is shutting down")
                )

    def _fail_pending(self, error: str, message: str) -> None:
        for _term, future in self._pending.values():
            if not future.done():
                future.set_exception(ControlError(error, message))
        self._pending.clear()

    # --- proposing -------------------------------------------------------------------

    def is_active(self) -> bool:
        return self.role == Role.LEADER.value and self.metadata_offset >= self._leader_ready_index

    def leader_address(self) -> tuple[str, int] | None:
        leader = self.leader_id
        return self.voters.get(leader) if leader is not None else None

    def _commit(self, records: list[MetadataRecord]) -> int:
        if not records:
            return self.metadata_offset
        future: Future[int] = Future()
        with self._propose_lock:
            if self._closed:
                raise ControlError("NOT_CONTROLLER", "the controller is shutting down")
            try:
                self._inbound.put(("propose", (encode_entry(records), future)), timeout=1)
            except queue.Full:
                raise ControlError("REQUEST_TIMED_OUT", "the controller is overloaded") from None
            self._proposals.add(future)
        try:
            return future.result(COMMIT_TIMEOUT_S)
        except FutureTimeout:
            raise ControlError(
                "REQUEST_TIMED_OUT", f"metadata not committed within {COMMIT_TIMEOUT_S}s"
            ) from None
        finally:
            with self._proposal_ended:
                self._proposals.discard(future)
                self._proposal_ended.notify_all()

    def _op(self, decide: Decision) -> int:
        with self._op_lock:
            if not self.is_active():
                raise ControlError(
                    "NOT_CONTROLLER",
                    f"node {self.node_id} is not the active controller (leader {self.leader_id})",
                )
            with self._state_lock:
                records = decide(self.image)
            return self._commit(records)

    # --- requests (the same surface as LocalController) --------------------------------

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        endpoints: tuple[tuple[str, str, int], ...] = (),
    ) -> int:
        def decide(image: MetadataImage) -> list[MetadataRecord]:
            epoch = next_broker_epoch(image, broker_id, self.metadata_offset)
            record = RegisterBrokerRecord(broker_id, epoch, host, port, None, endpoints)
            return register_broker_records(image, record, self.broker_defaults)

        self._op(decide)
        self._sessions.heard(broker_id, plain_monotonic_s())
        epoch = self.image.brokers[broker_id].broker_epoch
        _log.info("broker_registered", broker=broker_id, epoch=epoch)
        return epoch

    def heartbeat(
        self, broker_id: int, broker_epoch: int, metadata_offset: int, shutdown: bool
    ) -> bool:
        """Returns whether the broker is (still) fenced."""
        # Only the active controller judges registrations: a follower may not have
        # applied a broker's newest registration yet.
        if not self.is_active():
            raise ControlError(
                "NOT_CONTROLLER", f"node {self.node_id} is not the active controller"
            )
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise ControlError(
                "STALE_BROKER_EPOCH" if broker else "BROKER_NOT_AVAILABLE",
                f"broker {broker_id} epoch {broker_epoch} is not registered",
            )
        if shutdown:
            self._sessions.forget(broker_id)
            self._op(lambda image: fence_broker_records(image, broker_id, self.broker_defaults))
            return True
        self._sessions.heard(broker_id, plain_monotonic_s())
        caught_up = metadata_offset >= self._registered_at.get(broker_id, 0)
        if broker.fenced and caught_up:
            self._op(lambda image: unfence_broker_records(image, broker_id, self.broker_defaults))
        return self.image.brokers[broker_id].fenced

    # --- the active controller's duties ------------------------------------------------

    def _duties(self) -> None:
        last_rebalance = plain_monotonic_s()
        # Checked often enough that fencing lags a session's expiry by a tenth at most.
        poll_s = min(0.1, max(0.01, self.session_timeout_s / 10))
        last_poll = plain_monotonic_s()
        while not self._stopped.wait(poll_s):
            now = plain_monotonic_s()
            stalled = now - last_poll - poll_s
            last_poll = now
            if stalled > poll_s:
                # This process did not run for a while (CPU starved, a long apply):
                # heartbeats that arrived meanwhile still wait in its queue, so the
                # stall is not the brokers' silence. Their sessions move on by it.
                self._sessions.stalled(stalled)
            if not self.is_active() or not self._sessions.judging:
                continue
            unfenced = {b for b, r in self.image.brokers.items() if not r.fenced}
            expired = self._sessions.expired(now, unfenced)
            for broker in expired:
                try:
                    self._op(
                        lambda image, b=broker: fence_broker_records(image, b, self.broker_defaults)
                    )
                    _log.info("broker_fenced", broker=broker, reason="session_timeout")
                except ControlError as e:
                    # Proposed, maybe committed by the next leader: said, not hidden.
                    _log.info(
                        "broker_fence_unconfirmed",
                        broker=broker,
                        reason="session_timeout",
                        error=str(e),
                    )
                    break
            if self.auto_leader_rebalance and now - last_rebalance > self.rebalance_interval_s:
                last_rebalance = now
                with contextlib.suppress(ControlError):
                    self._op(preferred_leader_records)

    def describe(self) -> dict[str, object]:
        raft = self._raft
        return {
            "node_id": self.node_id,
            "leader_id": -1 if self.leader_id is None else self.leader_id,
            "term": self.term,
            "commit_index": self.commit_index,
            "published_offset": self.published_offset,
            "role": self.role,
            "last_index": raft.last_index if raft is not None else 0,
            "voters": self._voters_view(),
        }

    def _voters_view(self) -> list[tuple[int, int, int, int]]:
        """Per voter (id, log end index, last fetch ms, last caught-up ms), wall clock,
        as kafka-metadata-quorum --replication shows them; -1 where this node does
        not know (it is not the leader, or has not heard from the voter)."""
        raft = self._raft
        if raft is None:
            return []
        matches = raft.match_indexes()
        now_mono, now_ms = plain_monotonic_s(), int(plain_wall_s() * 1000)

        def wall(mono: float | None) -> int:
            return -1 if mono is None else now_ms - int((now_mono - mono) * 1000)

        out = []
        for v in raft.voters:
            if v == self.node_id:
                me = wall(now_mono) if matches else -1
                out.append((v, raft.last_index if matches else -1, me, me))
            else:
                out.append(
                    (
                        v,
                        matches.get(v, -1),
                        wall(self._last_heard.get(v)) if matches else -1,
                        wall(self._caught_up.get(v)) if matches else -1,
                    )
                )
        return out
