"""The Raft core of the controller quorum, as a plain state machine (etcd's raft shape).

No I/O, no threads, no clocks: time is `tick()` calls, randomness is an injected
`random.Random`, and everything the node wants done comes out of `ready()`:

    rd = node.ready()          # after tick() / step() / propose()
    persist rd.snapshot, rd.truncate_from + rd.entries, rd.hard_state  (fsync)
    send rd.messages           # only now: a vote or an ack must never outlive a crash
    apply rd.committed_entries (skip no-ops: empty data)
    node.advance(rd)

Pre-vote keeps a partitioned node from inflating terms; check-quorum makes a
leader cut off from a majority step down; a follower that heard from a leader
within an election timeout ignores vote requests (the leader lease), so a
rejoining node cannot depose a healthy leader. Nodes not in `voters` are
observers (KRaft brokers): they receive the log but never vote or campaign.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry; empty data is the no-op a new leader appends."""

    index: int
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state machine up to and including `index` (whose entry had `term`)."""

    index: int
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HardState:
    term: int
    voted_for: int | None


@dataclass(frozen=True, slots=True)
class PersistentState:
    """What a restart loads: the last persisted hard state, snapshot and the entries after it."""

    term: int = 0
    voted_for: int | None = None
    snapshot: Snapshot | None = None
    entries: Sequence[Entry] = ()


# ---- messages: plain data, so a transport can carry them field by field ------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: int
    dst: int
    term: int  # for a pre-vote, the term the sender would campaign in (its term + 1)
    last_index: int
    last_term: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    term: int
    granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Entries after (prev_index, prev_term); no entries is a heartbeat."""

    src: int
    dst: int
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    leader_commit: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """On success `match_index` is the last index known to match the leader. On
    rejection `reject_index` is the prev_index refused and (hint_index, hint_term)
    is the follower's last entry that may match, so the leader skips whole terms."""

    src: int
    dst: int
    term: int
    success: bool
    match_index: int = 0
    reject_index: int = 0
    hint_index: int = 0
    hint_term: int = 0


@dataclass(frozen=True, slots=True)
class InstallSnapshotRequest:
    src: int
    dst: int
    term: int
    snapshot_index: int
    snapshot_term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class InstallSnapshotResponse:
    src: int
    dst: int
    term: int
    match_index: int


Message = (
    VoteRequest
    | VoteResponse
    | AppendRequest
    | AppendResponse
    | InstallSnapshotRequest
    | InstallSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Ready:
    """Work for the shell, in this order: persist `snapshot` (it replaces the whole
    persisted log), drop persisted entries from `truncate_from` on, append
    `entries`, persist `hard_state`; then send `messages`; then apply
    `committed_entries`; then `advance(ready)`."""

    hard_state: HardState | None
    snapshot: Snapshot | None
    truncate_from: int | None
    entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"
    OBSERVER = "observer"


class NotLeaderError(Exception):
    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the leader; the leader is {leader_id}")
        self.leader_id = leader_id


# ---- the log -----------------------------------------------------------------------------


class RaftLog:
    """Entries after a snapshot point; index 0 term 0 is the empty log's origin."""

    def __init__(self, snapshot: Snapshot | None, entries: Sequence[Entry]) -> None:
        self.snapshot = snapshot
        self.offset = snapshot.index if snapshot else 0  # index of the entry before entries[0]
        self.offset_term = snapshot.term if snapshot else 0
        self.entries: list[Entry] = list(entries)
        for i, e in enumerate(self.entries):
            assert e.index == self.offset + 1 + i, f"entries not contiguous at {e}"

    @property
    def last_index(self) -> int:
        return self.offset + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.offset_term

    def term_at(self, index: int) -> int | None:
        """The term of the entry at index, or None when compacted away or not there."""
        if index == self.offset:
            return self.offset_term
        if self.offset < index <= self.last_index:
            return self.entries[index - self.offset - 1].term
        return None

    def slice(
        self, lo: int, hi: int, max_count: int | None = None, max_bytes: int = 0
    ) -> list[Entry]:
        """Entries [lo, hi): at most max_count, and if max_bytes, at most that much data
        beyond the first entry (one entry always goes, however large)."""
        assert lo > self.offset, f"entries at {lo} are compacted (snapshot at {self.offset})"
        start = lo - self.offset - 1
        stop = min(hi - self.offset - 1, len(self.entries))
        if max_count is not None:
            stop = min(stop, start + max_count)
        out = self.entries[start:stop]
        if max_bytes:
            size = 0
            for n, e in enumerate(out):
                size += len(e.data)
                if size > max_bytes and n > 0:
                    return out[:n]
        return out

    def append(self, entry: Entry) -> None:
        assert entry.index == self.last_index + 1, f"append {entry.index} after {self.last_index}"
        assert entry.term >= self.last_term, "terms never fall along the log"
        self.entries.append(entry)

    def truncate_from(self, index: int) -> None:
        assert index > self.offset
        del self.entries[index - self.offset - 1 :]

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The largest index <= index whose term is <= term (the compaction point at worst)."""
        i = min(index, self.last_index)
        while i > self.offset and self.entries[i - self.offset - 1].term > term:
            i -= 1
        return i

    def compact(self, snapshot: Snapshot) -> None:
        assert self.term_at(snapshot.index) == snapshot.term
        del self.entries[: snapshot.index - self.offset]
        self.snapshot, self.offset, self.offset_term = snapshot, snapshot.index, snapshot.term

    def restore(self, snapshot: Snapshot) -> None:
        self.entries.clear()
        self.snapshot, self.offset, self.offset_term = snapshot, snapshot.index, snapshot.term


# ---- the leader's view of one peer (etcd's Progress) ---------------------------------------


class _Replication(enum.Enum):
    PROBE = 1  # next is a guess: one append at a time until one succeeds
    REPLICATE = 2  # next is optimistic: pipeline up to max_inflight appends
    SNAPSHOT = 3  # a snapshot is on its way; wait for its answer (or time out)


@dataclass(slots=True)
class _Progress:
    match: int
    next: int
    state: _Replication = _Replication.PROBE
    paused: bool = False  # PROBE: an append is out, wait for its answer or the next heartbeat
    inflight: deque[int] = field(default_factory=deque)  # last index of each pipelined append
    recent_active: bool = False
    pending_snapshot: int = 0
    snapshot_wait: int = 0

    def become_probe(self) -> None:
        self.state, self.next, self.paused = _Replication.PROBE, self.match + 1, False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state, self.next, self.paused = _Replication.REPLICATE, self.match + 1, False
        self.inflight.clear()

    def become_snapshot(self, index: int) -> None:
        self.state, self.pending_snapshot, self.snapshot_wait = _Replication.SNAPSHOT, index, 0
        self.inflight.clear()


# ---- the node ------------------------------------------------------------------------------


class RaftNode:
    def __init__(
        self,
        node_id: int,
        voters: Sequence[int],
        observers: Sequence[int] = (),
        *,
        persisted: PersistentState | None = None,
        election_ticks: int = 10,
        heartbeat_ticks: int = 1,
        rng: random.Random,
        max_append_entries: int = 64,
        max_append_bytes: int = 1 << 20,
        max_inflight: int = 4,
    ) -> None:
        assert 0 < heartbeat_ticks < election_ticks, "heartbeats must come well within a timeout"
        assert not set(voters) & set(observers), "a node is a voter or an observer, not both"
        self.id = node_id
        self.voters = tuple(sorted(voters))
        self.observers = tuple(sorted(observers))
        self.is_voter = node_id in self.voters
        self.election_ticks = election_ticks
        self.heartbeat_ticks = heartbeat_ticks
        self.max_append_entries = max_append_entries
        self.max_append_bytes = max_append_bytes
        self.max_inflight = max_inflight
        self._rng = rng
        self._quorum = len(self.voters) // 2 + 1

        p = persisted or PersistentState()
        self._term = p.term
        self._voted_for = p.voted_for
        self._log = RaftLog(p.snapshot, p.entries)
        self._commit = self._log.offset  # a snapshot holds only committed entries
        self._applied = self._log.offset
        self._leader: int | None = None
        self._role = Role.FOLLOWER if self.is_voter else Role.OBSERVER

        # What the shell has persisted, so ready() hands out only what is new.
        self._persisted_hard = HardState(self._term, self._voted_for)
        self._stable_last = self._log.last_index
        self._truncate_from: int | None = None
        self._pending_snapshot: Snapshot | None = None
        self._msgs: list[Message] = []
        self._ready_out = False

        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = self._random_timeout()
        self._votes: dict[int, bool] = {}
        self._progress: dict[int, _Progress] = {}

    # ---- read-only view ----

    @property
    def role(self) -> Role:
        return self._role

    def match_indexes(self) -> dict[int, int]:
        """Leader only: the last index known to be on each voter (its own last index
        for itself); empty on a follower."""
        if self._role is not Role.LEADER:
            return {}
        return {
            v: (self._log.last_index if v == self.id else self._progress[v].match)
            for v in self.voters
        }

    @property
    def term(self) -> int:
        return self._term

    @property
    def voted_for(self) -> int | None:
        return self._voted_for

    @property
    def leader_id(self) -> int | None:
        return self._leader

    @property
    def commit_index(self) -> int:
        return self._commit

    @property
    def applied_index(self) -> int:
        return self._applied

    @property
    def last_index(self) -> int:
        return self._log.last_index

    @property
    def last_term(self) -> int:
        return self._log.last_term

    @property
    def snapshot(self) -> Snapshot | None:
        return self._log.snapshot

    @property
    def snapshot_index(self) -> int:
        """Entries up to here are compacted into the snapshot (0: none)."""
        return self._log.offset

    def term_at(self, index: int) -> int | None:
        return self._log.term_at(index)

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Log entries [lo, hi) that are not compacted away."""
        return self._log.slice(max(lo, self._log.offset + 1), hi)

    # ---- inputs ----

    def tick(self) -> None:
        self._check_no_ready()
        if self._role is Role.LEADER:
            self._tick_leader()
            return
        self._election_elapsed += 1
        if self.is_voter and self._election_elapsed >= self._timeout:
            self._start_pre_vote()

    def propose(self, data: bytes) -> int:
        """Append data to the log and return its index; it is committed when an entry
        with this index *and the term at proposal* shows up in committed_entries."""
        self._check_no_ready()
        if not data:
            raise ValueError("empty data is reserved for the leader's no-op entry")
        if self._role is not Role.LEADER:
            raise NotLeaderError(self._leader)
        index = self._append_own(data)
        self._broadcast_append()
        return index

    def step(self, m: Message) -> None:
        self._check_no_ready()
        assert m.dst == self.id, f"{m} is not for node {self.id}"
        if m.term > self._term:
            if isinstance(m, VoteRequest) and self._in_lease():
                return  # a live leader exists: neither grant nor let the term move
            if isinstance(m, VoteRequest) and m.pre_vote:
                pass  # a pre-vote never moves our term
            elif isinstance(m, VoteResponse) and m.pre_vote and m.granted:
                pass  # granted pre-votes carry the term we would campaign in
            else:
                leader = m.src if isinstance(m, AppendRequest | InstallSnapshotRequest) else None
                self._become_follower(m.term, leader)
        elif m.term < self._term:
            # Tell a stale leader or pre-candidate about our term so it steps down;
            # anything else from an old term is simply outdated.
            if isinstance(m, AppendRequest):
                self._send(AppendResponse(self.id, m.src, self._term, False, 0, m.prev_index))
            elif isinstance(m, InstallSnapshotRequest):
                self._send(InstallSnapshotResponse(self.id, m.src, self._term, self._commit))
            elif isinstance(m, VoteRequest) and m.pre_vote:
                self._send(VoteResponse(self.id, m.src, self._term, False, True))
            return

        match m:
            case VoteRequest():
                self._on_vote_request(m)
            case VoteResponse():
                self._on_vote_response(m)
            case AppendRequest():
                self._on_append_request(m)
            case AppendResponse():
                self._on_append_response(m)
            case InstallSnapshotRequest():
                self._on_snapshot_request(m)
            case InstallSnapshotResponse():
                self._on_snapshot_response(m)
            case _:
                raise TypeError(f"not a raft message: {m!r}")

    def compact(self, index: int, snapshot_data: bytes) -> None:
        """The state machine's image through `index` (already applied) replaces the
        log up to it. The shell persists the snapshot itself and may then drop its
        persisted entries <= index; a restart passes that snapshot back in."""
        self._check_no_ready()
        if index <= self._log.offset:
            return
        if index > self._applied:
            raise ValueError(f"cannot compact to {index}: only {self._applied} is applied")
        term = self._log.term_at(index)
        assert term is not None
        self._log.compact(Snapshot(index, term, snapshot_data))

    # ---- outputs ----

    def has_ready(self) -> bool:
        return bool(
            self._msgs
            or self._pending_snapshot
            or self._stable_last < self._log.last_index
            or self._truncate_from is not None
            or self._persisted_hard != HardState(self._term, self._voted_for)
            or self._applied < self._commit
        )

    def ready(self) -> Ready:
        self._check_no_ready()
        hard = HardState(self._term, self._voted_for)
        snap = self._pending_snapshot
        applied = max(self._applied, snap.index) if snap else self._applied
        first_unstable = self._stable_last + 1
        rd = Ready(
            hard_state=hard if hard != self._persisted_hard else None,
            snapshot=snap,
            truncate_from=self._truncate_from,
            entries=tuple(self._log.slice(first_unstable, self._log.last_index + 1)),
            messages=tuple(self._msgs),
            committed_entries=tuple(self._log.slice(applied + 1, self._commit + 1)),
        )
        self._ready_out = True
        return rd

    def advance(self, rd: Ready) -> None:
        """The shell has persisted, sent and applied everything in `rd`."""
        if not self._ready_out:
            raise RuntimeError("advance() without ready()")
        self._ready_out = False
        if rd.hard_state is not None:
            self._persisted_hard = rd.hard_state
        if rd.snapshot is not None:
            self._pending_snapshot = None
            self._applied = max(self._applied, rd.snapshot.index)
        self._truncate_from = None
        self._stable_last = self._log.last_index
        if rd.committed_entries:
            last = rd.committed_entries[-1].index
            assert last > self._applied, "the applied index only rises"
            self._applied = last
        del self._msgs[: len(rd.messages)]

    # ---- roles ----

    def _random_timeout(self) -> int:
        # [T, 1.5 T): the first follower to time out decides the failover time, and
        # with pre-vote and the leader lease a split vote only costs another draw, so
        # a narrower spread than Raft's [T, 2 T) buys a faster median and tail
        # (bench/controller.py) for a few more retried elections.
        return self._rng.randrange(
            self.election_ticks, self.election_ticks + max(2, self.election_ticks // 2)
        )

    def _reset_timers(self) -> None:
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = self._random_timeout()

    def _set_term(self, term: int) -> None:
        assert term >= self._term, f"term went back from {self._term} to {term}"
        if term > self._term:
            self._term, self._voted_for = term, None

    def _become_follower(self, term: int, leader: int | None) -> None:
        self._set_term(term)
        self._role = Role.FOLLOWER if self.is_voter else Role.OBSERVER
        self._leader = leader
        self._progress = {}
        self._reset_timers()

    def _start_pre_vote(self) -> None:
        assert self.is_voter, "observers never campaign"
        self._role = Role.PRE_CANDIDATE
        self._leader = None
        self._reset_timers()
        self._votes = {self.id: True}
        if not self._tally():
            self._request_votes(pre_vote=True)

    def _start_election(self) -> None:
        self._set_term(self._term + 1)
        self._vote_for(self.id)
        self._role = Role.CANDIDATE
        self._leader = None
        self._reset_timers()
        self._votes = {self.id: True}
        if not self._tally():
            self._request_votes(pre_vote=False)

    def _request_votes(self, *, pre_vote: bool) -> None:
        term = self._term + 1 if pre_vote else self._term
        for v in self.voters:
            if v != self.id:
                self._send(
                    VoteRequest(
                        self.id, v, term, self._log.last_index, self._log.last_term, pre_vote
                    )
                )

    def _tally(self) -> bool:
        """Move on if the votes decide the election; True when they did."""
        granted = sum(1 for g in self._votes.values() if g)
        if granted >= self._quorum:
            if self._role is Role.PRE_CANDIDATE:
                self._start_election()
            else:
                self._become_leader()
            return True
        if len(self._votes) - granted >= self._quorum:
            self._become_follower(self._term, None)
            return True
        return False

    def _become_leader(self) -> None:
        assert self._role is Role.CANDIDATE and self._voted_for == self.id
        self._role = Role.LEADER
        self._leader = self.id
        self._reset_timers()
        nxt = self._log.last_index + 1
        self._progress = {
            p: _Progress(match=0, next=nxt) for p in self.voters + self.observers if p != self.id
        }
        # A no-op of our own term: committing it commits every earlier entry, which
        # counting replicas alone may not (Raft §5.4.2, the Figure 8 scenario).
        self._append_own(b"")
        self._broadcast_append()

    def _vote_for(self, candidate: int) -> None:
        assert self._voted_for in (None, candidate), (
            f"node {self.id} already voted for {self._voted_for} in term {self._term}"
        )
        self._voted_for = candidate

    def _in_lease(self) -> bool:
        return self._leader is not None and self._election_elapsed < self.election_ticks

    # ---- elections ----

    def _log_up_to_date(self, last_term: int, last_index: int) -> bool:
        return (last_term, last_index) >= (self._log.last_term, self._log.last_index)

    def _on_vote_request(self, m: VoteRequest) -> None:
        if not self.is_voter:
            return
        can_vote = (
            self._voted_for == m.src
            or (self._voted_for is None and self._leader is None)
            or (m.pre_vote and m.term > self._term)
        )
        if can_vote and self._log_up_to_date(m.last_term, m.last_index):
            # A granted pre-vote answers in the asked-for term, so the asker can count it.
            self._send(VoteResponse(self.id, m.src, m.term, True, m.pre_vote))
            if not m.pre_vote:
                self._vote_for(m.src)
                self._election_elapsed = 0
        else:
            self._send(VoteResponse(self.id, m.src, self._term, False, m.pre_vote))

    def _on_vote_response(self, m: VoteResponse) -> None:
        if m.src not in self.voters:
            return
        if m.pre_vote:
            if self._role is not Role.PRE_CANDIDATE:
                return
            if m.granted != (m.term == self._term + 1):
                return  # grants come in the campaign term, refusals in ours
        elif self._role is not Role.CANDIDATE or m.term != self._term:
            return
        self._votes.setdefault(m.src, m.granted)
        self._tally()

    # ---- replication, follower side ----

    def _on_append_request(self, m: AppendRequest) -> None:
        assert self._role is not Role.LEADER, f"two leaders in term {self._term}"
        if self._role in (Role.PRE_CANDIDATE, Role.CANDIDATE) or self._leader != m.src:
            self._become_follower(m.term, m.src)
        self._election_elapsed = 0
        prev_index, prev_term, entries = m.prev_index, m.prev_term, m.entries
        if prev_index < self._commit:
            # Our committed prefix is the leader's too: skip what it covers, so a
            # compacted log never needs to check a term it no longer has.
            skip = min(self._commit - prev_index, len(entries))
            for e in entries[:skip]:
                t = self._log.term_at(e.index)
                assert t is None or t == e.term, f"committed entry {e.index} would change"
            entries = entries[skip:]
            prev_index = self._commit
            prev_term = self._log.term_at(prev_index)  # type: ignore[assignment]
        if self._log.term_at(prev_index) != prev_term:
            hint = self._log.find_conflict_by_term(min(prev_index, self._log.last_index), prev_term)
            hint_term = self._log.term_at(hint)
            assert hint_term is not None
            self._send(
                AppendResponse(self.id, m.src, self._term, False, 0, m.prev_index, hint, hint_term)
            )
            return
        for i, e in enumerate(entries):
            t = self._log.term_at(e.index)
            if t == e.term:
                continue
            if t is not None:
                assert e.index > self._commit, f"committed entry {e.index} would be overwritten"
                self._log.truncate_from(e.index)
                if e.index <= self._stable_last:
                    self._stable_last = e.index - 1
                    if self._truncate_from is None or e.index < self._truncate_from:
                        self._truncate_from = e.index
            for rest in entries[i:]:
                self._log.append(rest)
            break
        last_new = prev_index + len(entries)
        self._commit_to(min(m.leader_commit, last_new))
        self._send(AppendResponse(self.id, m.src, self._term, True, last_new))

    def _on_snapshot_request(self, m: InstallSnapshotRequest) -> None:
        assert self._role is not Role.LEADER, f"two leaders in term {self._term}"
        if self._role in (Role.PRE_CANDIDATE, Role.CANDIDATE) or self._leader != m.src:
            self._become_follower(m.term, m.src)
        self._election_elapsed = 0
        if m.snapshot_index > self._commit:
            if self._log.term_at(m.snapshot_index) == m.snapshot_term:
                self._commit_to(m.snapshot_index)  # we have those entries: just commit them
            else:
                snap = Snapshot(m.snapshot_index, m.snapshot_term, m.data)
                self._log.restore(snap)
                self._commit_to(snap.index)
                self._pending_snapshot = snap
                self._stable_last = snap.index  # persisting the snapshot replaces the log
                self._truncate_from = None
        self._send(InstallSnapshotResponse(self.id, m.src, self._term, self._commit))

    def _commit_to(self, index: int) -> None:
        """Raise the commit index (it never falls); a lower index is old news."""
        if index > self._commit:
            assert index <= self._log.last_index, "cannot commit entries we do not have"
            self._commit = index

    # ---- replication, leader side ----

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        for pr in self._progress.values():
            if pr.state is _Replication.SNAPSHOT:
                pr.snapshot_wait += 1
                if pr.snapshot_wait >= self.election_ticks:
                    pr.become_probe()  # the snapshot or its answer was lost: try again
        if self._election_elapsed >= self.election_ticks:
            self._election_elapsed = 0
            active = 1 + sum(
                1 for p in self.voters if p != self.id and self._progress[p].recent_active
            )
            for pr in self._progress.values():
                pr.recent_active = False
            if active < self._quorum:
                # Cut off from a majority: stop taking proposals that could never commit.
                self._become_follower(self._term, None)
                return
        if self._heartbeat_elapsed >= self.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            for peer in self._progress:
                self._send_heartbeat(peer)

    def _append_own(self, data: bytes) -> int:
        index = self._log.last_index + 1
        self._log.append(Entry(index, self._term, data))
        if self._quorum == 1:
            self._maybe_commit()
        return index

    def _broadcast_append(self) -> None:
        for peer in self._progress:
            self._send_append(peer)

    def _send_heartbeat(self, peer: int) -> None:
        pr = self._progress[peer]
        if pr.state is _Replication.PROBE:
            pr.paused = False  # a lost probe is retried when this heartbeat is answered
        # prev = what the peer is known to hold, so a heartbeat always succeeds and
        # carries the commit index as far as that; a compacted match says nothing.
        prev_term = self._log.term_at(pr.match)
        prev = pr.match if prev_term is not None else 0
        self._send(AppendRequest(self.id, peer, self._term, prev, prev_term or 0, (), self._commit))

    def _send_append(self, peer: int, send_if_empty: bool = False) -> None:
        pr = self._progress[peer]
        if pr.state is _Replication.SNAPSHOT or (pr.state is _Replication.PROBE and pr.paused):
            return
        if pr.state is _Replication.REPLICATE and len(pr.inflight) >= self.max_inflight:
            return
        prev = pr.next - 1
        prev_term = self._log.term_at(prev)
        if prev_term is None:
            snap = self._log.snapshot
            assert snap is not None and prev < snap.index
            self._send(
                InstallSnapshotRequest(self.id, peer, self._term, snap.index, snap.term, snap.data)
            )
            pr.become_snapshot(snap.index)
            return
        entries = self._log.slice(
            pr.next, self._log.last_index + 1, self.max_append_entries, self.max_append_bytes
        )
        if not entries and not send_if_empty:
            return
        self._send(
            AppendRequest(self.id, peer, self._term, prev, prev_term, tuple(entries), self._commit)
        )
        if pr.state is _Replication.PROBE:
            pr.paused = True
        elif entries:
            pr.next = entries[-1].index + 1
            pr.inflight.append(entries[-1].index)

    def _on_append_response(self, m: AppendResponse) -> None:
        if self._role is not Role.LEADER or m.src not in self._progress:
            return
        pr = self._progress[m.src]
        pr.recent_active = True
        if not m.success:
            stale = (
                pr.state is _Replication.SNAPSHOT
                or (pr.state is _Replication.REPLICATE and m.reject_index <= pr.match)
                or (pr.state is _Replication.PROBE and m.reject_index != pr.next - 1)
            )
            if stale:
                return
            probe = self._log.find_conflict_by_term(m.hint_index, m.hint_term)
            pr.become_probe()
            pr.next = max(min(m.reject_index, probe + 1), pr.match + 1)
            self._send_append(m.src, send_if_empty=True)
            return
        assert m.match_index <= self._log.last_index, "a follower acked entries we never sent"
        if m.match_index > pr.match:
            pr.match = m.match_index
            pr.next = max(pr.next, pr.match + 1)
            while pr.inflight and pr.inflight[0] <= pr.match:
                pr.inflight.popleft()
            if m.src in self.voters:
                self._maybe_commit()
        elif pr.state is _Replication.REPLICATE and len(pr.inflight) >= self.max_inflight:
            pr.inflight.popleft()  # answered without progress: an append was lost
        if m.match_index >= pr.match:
            if pr.state is _Replication.PROBE:
                pr.become_replicate()
            elif pr.state is _Replication.SNAPSHOT and (
                pr.match >= pr.pending_snapshot or pr.match >= self._log.offset
            ):
                pr.become_probe()
        if pr.match < self._log.last_index:
            self._send_append(m.src, send_if_empty=True)

    def _on_snapshot_response(self, m: InstallSnapshotResponse) -> None:
        if self._role is not Role.LEADER or m.src not in self._progress:
            return
        pr = self._progress[m.src]
        pr.recent_active = True
        if m.match_index > pr.match:
            pr.match = m.match_index
            if m.src in self.voters:
                self._maybe_commit()
        if pr.state is _Replication.SNAPSHOT:
            pr.become_probe()
            self._send_append(m.src, send_if_empty=True)

    def _maybe_commit(self) -> None:
        matches = sorted(
            (self._log.last_index if v == self.id else self._progress[v].match) for v in self.voters
        )
        n = matches[len(matches) - self._quorum]
        # Only an entry of our own term is committed by counting (Raft §5.4.2).
        if n > self._commit and self._log.term_at(n) == self._term:
            self._commit_to(n)

    # ---- plumbing ----

    def _send(self, m: Message) -> None:
        self._msgs.append(m)

    def _check_no_ready(self) -> None:
        # Between ready() and advance() the Ready describes the node exactly; an input
        # in between would change what advance() marks as persisted.
        if self._ready_out:
            raise RuntimeError("advance() the outstanding Ready first")
