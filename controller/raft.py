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

import random
from collections.abc import Sequence

from seglog.controller.raft_leader import RaftLeader
from seglog.controller.raft_messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    HardState,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    NotLeaderError,
    PersistentState,
    RaftLog,
    Ready,
    Role,
    Snapshot,
    VoteRequest,
    VoteResponse,
    _Progress,
)


class RaftNode(RaftLeader):
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
        self._campaign(Role.PRE_CANDIDATE)

    def _start_election(self) -> None:
        self._set_term(self._term + 1)
        self._vote_for(self.id)
        self._campaign(Role.CANDIDATE)

    def _campaign(self, role: Role) -> None:
        """Become `role` with this node's own vote and ask the other voters for theirs
        (a pre-candidate for a pre-vote, without a new term: etcd's campaign)."""
        self._role = role
        self._leader = None
        self._reset_timers()
        self._votes = {self.id: True}
        if not self._tally():
            self._request_votes(pre_vote=role == Role.PRE_CANDIDATE)

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

    # ---- plumbing ----

    def _send(self, m: Message) -> None:
        self._msgs.append(m)

    def _check_no_ready(self) -> None:
        # Between ready() and advance() the Ready describes the node exactly; an input
        # in between would change what advance() marks as persisted.
        if self._ready_out:
            raise RuntimeError("advance() the outstanding Ready first")


__all__ = [
    "AppendRequest",
    "AppendResponse",
    "Entry",
    "HardState",
    "InstallSnapshotRequest",
    "InstallSnapshotResponse",
    "Message",
    "NotLeaderError",
    "PersistentState",
    "RaftLog",
    "RaftNode",
    "Ready",
    "Role",
    "Snapshot",
    "VoteRequest",
    "VoteResponse",
]
