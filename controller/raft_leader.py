"""The Raft leader's side of replication (controller/raft.py): ticking heartbeats and
the check-quorum, appending its own entries, sending appends and snapshots to each peer
within its in-flight window, their answers, and the commit rule (an entry of the
current term on a quorum). A part of `RaftNode`, kept in its own class so each stays one
idea."""

from __future__ import annotations

from seglog.controller.raft_messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    RaftLog,
    Role,
    _Progress,
    _Replication,
)


class RaftLeader:
    # The node's state this part reads and changes (RaftNode sets it).
    id: int
    voters: tuple[int, ...]
    election_ticks: int
    heartbeat_ticks: int
    max_append_entries: int
    max_append_bytes: int
    max_inflight: int
    _quorum: int
    _term: int
    _log: RaftLog
    _commit: int
    _role: Role
    _election_elapsed: int
    _heartbeat_elapsed: int
    _progress: dict[int, _Progress]

    def _send(self, m: Message) -> None:
        raise NotImplementedError

    def _become_follower(self, term: int, leader: int | None) -> None:
        raise NotImplementedError

    def _commit_to(self, index: int) -> None:
        raise NotImplementedError

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
