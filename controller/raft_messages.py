"""The Raft core's vocabulary (controller/raft.py): entries, snapshots, the persisted
state, the messages between nodes, what `ready()` hands the shell, the errors, and the
leader's per-peer replication progress."""

from __future__ import annotations

import enum
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
