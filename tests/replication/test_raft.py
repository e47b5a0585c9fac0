"""Unit tests of the Raft core, each driving a few RaftNodes by hand through
messages, ticks and Readies (the seeded simulator covers the random interleavings)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from seglog.controller.raft import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    NotLeaderError,
    PersistentState,
    RaftNode,
    Role,
    VoteRequest,
    VoteResponse,
)
from seglog.sim.raft_node_state import SimDisk

ELECTION = 10


class Cluster:
    """Nodes, their simulated disks and a hand-driven network."""

    def __init__(
        self,
        voters: Sequence[int],
        observers: Sequence[int] = (),
        *,
        persisted: dict[int, PersistentState] | None = None,
        **kw,
    ) -> None:
        self.voters, self.observers = tuple(voters), tuple(observers)
        self.kw = kw
        self.disks: dict[int, SimDisk] = {}
        for i in self.voters + self.observers:
            p = (persisted or {}).get(i, PersistentState())
            self.disks[i] = SimDisk(p.term, p.voted_for, p.snapshot, list(p.entries))
        self.nodes: dict[int, RaftNode] = {}
        self.applied: dict[int, list[Entry]] = {}
        self.snapshots: dict[int, list[bytes]] = {}
        self.queue: list[Message] = []
        self.isolated: set[int] = set()
        self.down: set[int] = set()
        self.drop: Callable[[Message], bool] = lambda m: False
        for i in self.disks:
            self.start(i)

    def start(self, i: int) -> RaftNode:
        self.down.discard(i)
        self.nodes[i] = RaftNode(
            i,
            self.voters,
            self.observers,
            persisted=self.disks[i].load(),
            election_ticks=ELECTION,
            heartbeat_ticks=1,
            rng=random.Random(i),
            **self.kw,
        )
        self.applied[i] = []
        self.snapshots[i] = []
        return self.nodes[i]

    def crash(self, i: int) -> None:
        self.down.add(i)

    def flush(self, i: int) -> None:
        node = self.nodes[i]
        if i in self.down or not node.has_ready():
            return
        rd = node.ready()
        self.disks[i].persist(rd)
        self.queue.extend(rd.messages)
        if rd.snapshot:
            self.snapshots[i].append(rd.snapshot.data)
        self.applied[i].extend(rd.committed_entries)
        node.advance(rd)

    def blocked(self, m: Message) -> bool:
        return bool({m.src, m.dst} & self.isolated or {m.src, m.dst} & self.down or self.drop(m))

    def deliver(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            for i in self.nodes:
                self.flush(i)
            batch, self.queue = self.queue, []
            if not batch:
                return
            for m in batch:
                if not self.blocked(m):
                    self.nodes[m.dst].step(m)
                    self.flush(m.dst)

    def tick(self, ids: Sequence[int], n: int = 1) -> None:
        for _ in range(n):
            for i in ids:
                if i not in self.down:
                    self.nodes[i].tick()
                    self.flush(i)
            self.deliver()

    def elect(self, i: int) -> RaftNode:
        node = self.nodes[i]
        for _ in range(2 * ELECTION):
            node.tick()
            self.flush(i)
            if node.role is not Role.FOLLOWER:
                break
        self.deliver()
        assert node.role is Role.LEADER
        return node

    def leader_ticks(self, i: int, n: int) -> None:
        """Let the leader heartbeat n times with followers answering (followers' clocks
        stand still, so nobody else campaigns)."""
        self.tick([i], n)


def committed_data(entries: Sequence[Entry]) -> list[bytes]:
    return [e.data for e in entries if e.data]


def test_single_node_elects_itself_and_commits():
    c = Cluster([1])
    leader = c.elect(1)
    assert leader.term == 1 and leader.leader_id == 1
    leader.propose(b"x")
    c.flush(1)
    assert committed_data(c.applied[1]) == [b"x"]


def test_three_nodes_replicate_and_commit():
    c = Cluster([1, 2, 3])
    leader = c.elect(1)
    for k in range(5):
        leader.propose(f"e{k}".encode())
    c.deliver()
    c.leader_ticks(1, 2)  # heartbeats carry the new commit index to the followers
    want = [f"e{k}".encode() for k in range(5)]
    for i in (1, 2, 3):
        assert committed_data(c.applied[i]) == want
        assert c.nodes[i].commit_index == leader.last_index == 6  # the no-op, then 5 entries
        assert c.nodes[i].leader_id == 1


def test_pre_vote_keeps_a_partitioned_node_from_inflating_terms():
    c = Cluster([1, 2, 3])
    leader = c.elect(1)
    term = leader.term
    c.isolated = {3}
    c.tick([3], 20 * ELECTION)  # many election timeouts in isolation
    assert c.nodes[3].term == term, "pre-vote failed, so the term never moved"
    assert c.nodes[3].role is Role.PRE_CANDIDATE
    c.isolated.clear()
    c.leader_ticks(1, 3)
    assert leader.role is Role.LEADER and leader.term == term, "the rejoin did not disrupt"
    assert c.nodes[3].role is Role.FOLLOWER and c.nodes[3].leader_id == 1


def test_a_follower_in_its_leader_lease_ignores_vote_requests():
    c = Cluster([1, 2, 3])
    leader = c.elect(1)
    c.nodes[2].step(VoteRequest(3, 2, leader.term + 1, 100, 100, pre_vote=False))
    c.flush(2)
    assert c.nodes[2].term == leader.term and not c.queue


@pytest.mark.parametrize("pre_vote", [False, True])
def test_no_vote_for_a_stale_log(pre_vote: bool):
    entries = [Entry(1, 1, b"a"), Entry(2, 2, b"b"), Entry(3, 2, b"c")]
    c = Cluster([1, 2, 3], persisted={1: PersistentState(2, None, None, entries)})
    node = c.nodes[1]
    for last_index, last_term in [(5, 1), (2, 2), (0, 0)]:  # older last term, or shorter
        node.step(VoteRequest(2, 1, 3, last_index, last_term, pre_vote))
        c.flush(1)
        (resp,) = c.queue
        c.queue.clear()
        assert isinstance(resp, VoteResponse) and not resp.granted
    assert node.voted_for is None
    node.step(VoteRequest(2, 1, 3, 3, 2, pre_vote))  # as up to date: granted
    c.flush(1)
    assert c.queue[-1] == VoteResponse(1, 2, 3, True, pre_vote)
    assert node.voted_for == (None if pre_vote else 2)
    assert node.term == (2 if pre_vote else 3), "a pre-vote never moves the voter's term"


def test_the_vote_is_persisted_in_the_same_ready_that_sends_it():
    node = RaftNode(1, [1, 2, 3], persisted=None, rng=random.Random(0))
    node.step(VoteRequest(2, 1, 4, 0, 0, pre_vote=False))
    rd = node.ready()
    assert rd.hard_state is not None and (rd.hard_state.term, rd.hard_state.voted_for) == (4, 2)
    assert rd.messages == (VoteResponse(1, 2, 4, True, False),)


def test_at_most_one_vote_per_term():
    node = RaftNode(1, [1, 2, 3], persisted=None, rng=random.Random(0))
    node.step(VoteRequest(2, 1, 1, 0, 0, pre_vote=False))
    node.advance(node.ready())
    node.step(VoteRequest(3, 1, 1, 5, 1, pre_vote=False))
    rd = node.ready()
    assert rd.messages == (VoteResponse(1, 3, 1, False, False),)
    assert node.voted_for == 2


def test_leader_steps_down_when_check_quorum_fails():
    c = Cluster([1, 2, 3])
    leader = c.elect(1)
    c.isolated = {1}
    c.tick([1], 2 * ELECTION)
    assert leader.role is Role.FOLLOWER and leader.leader_id is None
    with pytest.raises(NotLeaderError) as e:
        leader.propose(b"x")
    assert e.value.leader_id is None


def test_leader_keeps_leading_with_a_majority():
    c = Cluster([1, 2, 3, 4, 5])
    leader = c.elect(1)
    c.isolated = {4, 5}
    c.leader_ticks(1, 5 * ELECTION)
    assert leader.role is Role.LEADER
    leader.propose(b"x")
    c.leader_ticks(1, 2)
    assert committed_data(c.applied[2]) == [b"x"]


def test_propose_on_a_follower_names_the_leader():
    c = Cluster([1, 2, 3])
    c.elect(2)
    with pytest.raises(NotLeaderError) as e:
        c.nodes[3].propose(b"x")
    assert e.value.leader_id == 2
    with pytest.raises(NotLeaderError) as e:
        Cluster([1, 2, 3]).nodes[1].propose(b"x")
    assert e.value.leader_id is None


def test_figure_8_an_old_term_entry_is_not_committed_by_counting():
    """Raft paper, Figure 8 (c)-(d): leader S1 of term 4 gets its term-2 entry at
    index 2 onto a majority; S5 holds a term-3 entry there and can still win, so
    counting replicas must not commit index 2 — only S1's own-term entry does."""
    e1 = Entry(1, 1, b"one")
    persisted = {
        1: PersistentState(3, None, None, [e1, Entry(2, 2, b"term2")]),
        2: PersistentState(3, None, None, [e1, Entry(2, 2, b"term2")]),
        3: PersistentState(3, None, None, [e1]),
        4: PersistentState(3, None, None, [e1]),
        5: PersistentState(3, None, None, [e1, Entry(2, 3, b"term3")]),
    }
    c = Cluster([1, 2, 3, 4, 5], persisted=persisted, max_append_entries=1)
    c.crash(5)
    # Nothing carrying index 3 (S1's no-op of term 4) gets through: S1 "crashes" first.
    c.drop = lambda m: isinstance(m, AppendRequest) and any(e.index >= 3 for e in m.entries)
    s1 = c.elect(1)
    assert s1.term == 4
    c.leader_ticks(1, 5)
    for i in (2, 3, 4):
        assert c.nodes[i].term_at(2) == 2, "index 2 of term 2 is on four of five voters"
    assert s1.commit_index < 2, "an entry of an earlier term was committed by counting"

    # Why: S5 can still win (its last term 3 beats their 2) and replace index 2.
    c.crash(1)
    c.drop = lambda m: False
    for i in (2, 3, 4):
        c.crash(i)
        c.start(i)  # restarted, they know no leader, so no lease holds S5 off
    s5 = c.start(5)
    s5.step(VoteRequest(1, 5, 4, 3, 4, pre_vote=False))  # learn term 4 like in the paper
    c.flush(5)
    c.queue.clear()
    c.elect(5)
    c.leader_ticks(5, 3)
    for i in (2, 3, 4, 5):
        assert c.nodes[i].term_at(2) == 3
        assert [e.data for e in c.applied[i]] == [b"one", b"term3", b""]


def test_figure_8_an_old_term_entry_commits_with_the_leaders_own():
    e1 = Entry(1, 1, b"one")
    persisted = {
        1: PersistentState(3, None, None, [e1, Entry(2, 2, b"term2")]),
        2: PersistentState(3, None, None, [e1]),
        3: PersistentState(3, None, None, [e1]),
    }
    c = Cluster([1, 2, 3], persisted=persisted, max_append_entries=1)
    s1 = c.elect(1)
    c.leader_ticks(1, 4)
    assert s1.commit_index == 3 and s1.term_at(3) == s1.term
    assert [e.data for e in c.applied[2]] == [b"one", b"term2", b""]


def test_fast_backtracking_skips_a_divergent_term_at_once():
    """A follower with 50 uncommitted entries of a dead term: the conflict hint
    lets the leader skip the whole term instead of probing index by index."""
    common = [Entry(1, 1, b"a")]
    persisted = {
        1: PersistentState(3, None, None, common + [Entry(i, 3, b"new") for i in range(2, 5)]),
        2: PersistentState(3, None, None, common + [Entry(i, 2, b"old") for i in range(2, 52)]),
        3: PersistentState(3, None, None, common),
    }
    c = Cluster([1, 2, 3], persisted=persisted)
    c.isolated = {3}
    rejects: list[AppendResponse] = []
    c.drop = lambda m: isinstance(m, AppendResponse) and not m.success and bool(rejects.append(m))
    c.elect(1)
    c.leader_ticks(1, 3)
    assert len(rejects) <= 2
    assert [c.nodes[2].term_at(i) for i in range(1, 6)] == [1, 3, 3, 3, 4]
    assert c.nodes[2].last_index == 5


def test_a_follower_truncates_its_conflicting_persisted_suffix():
    entries = [Entry(1, 1, b"a"), Entry(2, 1, b"b"), Entry(3, 1, b"c")]
    node = RaftNode(
        2, [1, 2, 3], persisted=PersistentState(1, None, None, entries), rng=random.Random(0)
    )
    node.step(AppendRequest(1, 2, 2, 1, 1, (Entry(2, 2, b"B"),), 1))
    rd = node.ready()
    assert rd.truncate_from == 2 and rd.entries == (Entry(2, 2, b"B"),)
    disk = SimDisk(1, None, None, list(entries))
    disk.persist(rd)
    assert disk.entries == [Entry(1, 1, b"a"), Entry(2, 2, b"B")]


def test_flow_control_bounds_appends_in_flight_and_entries_per_append():
    c = Cluster([1, 2], max_append_entries=3, max_inflight=2)
    leader = c.elect(1)
    c.leader_ticks(1, 1)
    c.isolated = {2}  # follower 2 stops answering; the leader must not flood it
    for k in range(20):
        leader.propose(b"p%d" % k)
    c.flush(1)
    assert len([m for m in c.queue if isinstance(m, AppendRequest) and m.dst == 2]) == 2
    c.isolated.clear()
    sent: list[AppendRequest] = []
    c.drop = lambda m: isinstance(m, AppendRequest) and bool(sent.append(m))
    c.leader_ticks(1, 10)
    assert c.nodes[2].last_index == leader.last_index == 21
    assert max(len(m.entries) for m in sent) == 3


def test_max_append_bytes_bounds_a_message_but_always_sends_one_entry():
    c = Cluster([1, 2, 3], max_append_bytes=250)
    leader = c.elect(1)
    c.leader_ticks(1, 1)
    c.isolated = {3}
    leader.propose(b"x" * 1000)
    for _ in range(9):
        leader.propose(b"y" * 100)
    c.leader_ticks(1, 2 * ELECTION)  # 3's appends are lost; the leader probes it again
    c.isolated.clear()
    sent: list[AppendRequest] = []
    c.drop = lambda m: isinstance(m, AppendRequest) and m.dst == 3 and bool(sent.append(m))
    c.leader_ticks(1, 5)
    assert c.nodes[3].last_index == leader.last_index == 11
    sizes = [[len(e.data) for e in m.entries] for m in sent if m.entries]
    assert [1000] in sizes and all(len(s) == 1 or sum(s) <= 250 for s in sizes)
    assert max(len(s) for s in sizes) == 2


def test_lagging_follower_gets_the_snapshot_then_the_rest():
    c = Cluster([1, 2, 3])
    leader = c.elect(1)
    c.leader_ticks(1, 2)
    c.isolated = {3}
    for k in range(30):
        leader.propose(b"e%d" % k)
        c.deliver()
    c.leader_ticks(1, 2)
    assert leader.applied_index == leader.commit_index == 31
    leader.compact(25, b"image-at-25")  # 3's log now ends before the leader's first index
    c.isolated.clear()
    leader.propose(b"after")
    c.leader_ticks(1, 4)
    s3 = c.nodes[3]
    assert c.snapshots[3] == [b"image-at-25"]
    assert c.disks[3].snapshot is not None and c.disks[3].snapshot.index == 25
    assert committed_data(c.applied[3]) == [b"e%d" % k for k in range(24, 30)] + [b"after"]
    assert s3.commit_index == leader.commit_index == 32
    assert s3.snapshot_index == 25 and s3.term_at(25) == leader.term_at(25)


def test_observer_never_votes_or_campaigns_but_receives_entries():
    c = Cluster([1, 2, 3], [4])
    obs = c.nodes[4]
    assert obs.role is Role.OBSERVER
    c.tick([4], 10 * ELECTION)
    assert obs.role is Role.OBSERVER and obs.term == 0 and not c.queue
    obs.step(VoteRequest(1, 4, 1, 0, 0, pre_vote=False))
    obs.step(VoteRequest(1, 4, 1, 0, 0, pre_vote=True))
    c.flush(4)
    assert obs.voted_for is None and not c.queue
    sent: list[Message] = []
    c.drop = lambda m: bool(sent.append(m))
    leader = c.elect(1)
    assert not [m for m in sent if isinstance(m, VoteRequest) and m.dst == 4]
    c.drop = lambda m: False
    leader.propose(b"x")
    c.leader_ticks(1, 2)
    assert committed_data(c.applied[4]) == [b"x"] and obs.leader_id == 1
    assert obs.role is Role.OBSERVER


def test_an_observers_ack_does_not_count_toward_commit():
    c = Cluster([1, 2, 3], [4])
    leader = c.elect(1)
    c.leader_ticks(1, 1)
    c.isolated = {2, 3}
    index = leader.propose(b"x")
    c.deliver()
    assert c.nodes[4].last_index == index
    assert leader.commit_index < index


def test_restart_keeps_term_and_vote():
    c = Cluster([1, 2, 3])
    node = c.nodes[1]
    node.step(VoteRequest(2, 1, 5, 0, 0, pre_vote=False))
    c.flush(1)
    c.queue.clear()
    c.crash(1)
    node = c.start(1)
    assert (node.term, node.voted_for, node.role) == (5, 2, Role.FOLLOWER)
    node.step(VoteRequest(3, 1, 5, 9, 5, pre_vote=False))
    node.step(VoteRequest(2, 1, 5, 0, 0, pre_vote=False))  # a retry from the same candidate
    c.flush(1)
    assert [m.granted for m in c.queue] == [False, True]  # type: ignore[union-attr]


def test_restart_keeps_the_log_and_snapshot_and_reapplies_after_it():
    c = Cluster([1])
    leader = c.elect(1)
    for k in range(6):
        leader.propose(b"e%d" % k)
        c.flush(1)
    leader.compact(4, b"img4")
    c.disks[1].compact(leader.snapshot)  # type: ignore[arg-type]
    c.crash(1)
    node = c.start(1)
    assert (node.snapshot_index, node.last_index, node.commit_index) == (4, 7, 4)
    c.elect(1)
    assert [e.data for e in c.applied[1]] == [b"e3", b"e4", b"e5", b""]


def test_a_stale_leader_learns_the_new_term_from_a_rejection():
    c = Cluster([1, 2, 3])
    old = c.elect(1)
    c.isolated = {1}
    c.tick([2, 3], 3 * ELECTION)  # their lease runs out; one of them wins
    (new,) = [c.nodes[i] for i in (2, 3) if c.nodes[i].role is Role.LEADER]
    assert new.term > old.term
    c.isolated.clear()
    c.tick([1], 1)
    assert old.role is Role.FOLLOWER and old.term == new.term


def test_advance_is_required_between_readies():
    node = RaftNode(1, [1, 2, 3], persisted=None, rng=random.Random(0))
    rd = node.ready()
    with pytest.raises(RuntimeError):
        node.tick()
    node.advance(rd)
    with pytest.raises(RuntimeError):
        node.advance(rd)


def test_terms_and_commit_never_go_back():
    node = RaftNode(1, [1, 2, 3], persisted=PersistentState(7, None), rng=random.Random(0))
    node.step(AppendRequest(2, 1, 3, 0, 0, (Entry(1, 3, b"x"),), 1))  # from an old term
    rd = node.ready()
    assert node.term == 7 and node.commit_index == 0 and rd.entries == ()
    assert rd.messages == (AppendResponse(1, 2, 7, False, 0, 0),)
