"""The pure coordinator, one rule at a time: requests in, answers and appends out, with
the appends acknowledged (or failed) by hand as the replica manager would."""

from __future__ import annotations

import random
import struct
from dataclasses import replace

import pytest

from seglog.node.groups import offsets_records as rec
from seglog.node.groups.coordinator_actions import Action, Append, Respond
from seglog.node.groups.group_config import GroupConfig
from seglog.node.groups.group_coordinator import GroupCoordinator
from seglog.node.groups.group_coordinator_shard import CoordinatorShard
from seglog.node.groups.group_messages import (
    CommitPartition,
    CommitResult,
    ErrorResult,
    JoinRequest,
    JoinResult,
    OffsetCommitRequest,
    Result,
    SyncRequest,
    SyncResult,
)
from seglog.node.groups.group_state import GroupState
from seglog.storage.txn_verification import VerificationGuard

G = "g"


def shard(**config: int) -> CoordinatorShard:
    s = CoordinatorShard(0, 5, GroupConfig(**config), random.Random(1))
    s.finish_loading(0)
    return s


def join_req(member_id: str = "", instance: str | None = None, meta: bytes = b"m") -> JoinRequest:
    return JoinRequest(G, member_id, instance, 10_000, 10_000, "consumer", (("range", meta),))


def answers(actions: list[Action]) -> dict[int, Result]:
    return {a.request_id: a.result for a in actions if isinstance(a, Respond)}


def appends(actions: list[Action]) -> list[Append]:
    return [a for a in actions if isinstance(a, Append)]


def ack_all(
    s: CoordinatorShard, actions: list[Action], now: int, error: str = "NONE"
) -> list[Action]:
    out: list[Action] = []
    for a in appends(actions):
        assert a.leader_epoch == 5 and a.partition == 0
        out += s.on_write_done(a.write_id, error, now)
    return out


def stable_member(s: CoordinatorShard, instance: str | None = None) -> JoinResult:
    """A single member through MEMBER_ID_REQUIRED, join and sync to Stable."""
    if instance is None:
        first = answers(s.join(1, join_req(), 0))[1]
        assert isinstance(first, JoinResult) and first.error == "MEMBER_ID_REQUIRED"
        member_id = first.member_id
    else:
        member_id = ""
    out = s.join(2, join_req(member_id, instance), 0)
    out += s.tick(0) + s.tick(4000)  # past the initial rebalance delay
    joined = answers(out)[2]
    assert isinstance(joined, JoinResult) and joined.error == "NONE", joined
    out = s.sync(
        3,
        SyncRequest(
            G,
            joined.generation,
            joined.member_id,
            instance,
            None,
            None,
            ((joined.member_id, b"A"),),
        ),
        4000,
    )
    assert not answers(out)  # waits for the replication of the assignment
    synced = answers(ack_all(s, out, 4001))[3]
    assert isinstance(synced, SyncResult) and synced.assignment == b"A"
    assert s.groups[G].state is GroupState.STABLE
    return joined


def test_the_initial_delay_collects_members_into_one_generation():
    s = shard(group_initial_rebalance_delay_ms=3000)
    a = s.join(1, JoinRequest(G, "", None, 10_000, 10_000, "consumer", (("range", b""),), False), 0)
    assert not answers(a)
    b = s.join(
        2, JoinRequest(G, "", None, 10_000, 10_000, "consumer", (("range", b""),), False), 2000
    )
    assert not answers(b)
    assert not answers(s.tick(4000))  # the second member extended the delay to 5000
    done = answers(s.tick(5000))
    assert {r.generation for r in done.values()} == {1}  # type: ignore[union-attr]
    leader = [r for r in done.values() if r.members]  # type: ignore[union-attr]
    assert len(leader) == 1 and len(leader[0].members) == 2  # type: ignore[union-attr]


def test_commit_is_applied_only_once_replicated_and_fenced_on_failure():
    s = shard()
    joined = stable_member(s)
    p = [CommitPartition("t", 0, 10)]
    out = s.commit(10, G, joined.generation, joined.member_id, None, p, 5000)
    assert not answers(out) and s.offsets.get(G) is None  # nothing before replication
    done = answers(ack_all(s, out, 5001))[10]
    assert done == CommitResult((("t", 0, "NONE"),))
    assert s.offsets[G][("t", 0)].offset == 10
    out = s.commit(
        11, G, joined.generation, joined.member_id, None, [CommitPartition("t", 0, 20)], 5002
    )
    failed = answers(ack_all(s, out, 5003, "FENCED_LEADER_EPOCH"))[11]
    assert failed == CommitResult((("t", 0, "NOT_COORDINATOR"),))
    assert s.offsets[G][("t", 0)].offset == 10
    stale = answers(s.commit(12, G, joined.generation - 1, joined.member_id, None, p, 5004))[12]
    assert stale == CommitResult((("t", 0, "ILLEGAL_GENERATION"),))
    unknown = answers(s.commit(13, G, joined.generation, "nobody", None, p, 5005))[13]
    assert unknown == CommitResult((("t", 0, "UNKNOWN_MEMBER_ID"),))


def test_a_txn_offset_commit_carries_its_verification_guard_to_the_append():
    """TxnOffsetCommit (KIP-890): the guard of the group partition's verification goes
    with the transactional append, for the log to check; the offsets wait for the
    transaction's marker. A refused append (the guard spent by an ABORT, a fenced
    producer) is answered as Kafka does, by its own name."""
    s = shard()
    guard = VerificationGuard()
    req = OffsetCommitRequest(G, -1, "", None, (CommitPartition("t", 0, 10),))
    out = s.txn_commit(20, req, (7, 0), 1000, guard)
    (append,) = appends(out)
    assert (append.producer, append.guard) == ((7, 0), guard)
    assert answers(ack_all(s, out, 1001))[20] == CommitResult((("t", 0, "NONE"),))
    assert s.offsets.get(G) is None  # pending until the COMMIT marker
    s.complete_txn(7, commit=True)
    assert s.offsets[G][("t", 0)].offset == 10
    for error in ("INVALID_TXN_STATE", "INVALID_PRODUCER_EPOCH"):
        out = s.txn_commit(21, req, (7, 0), 1002)
        assert appends(out)[0].guard is None  # the transaction was open: none needed
        assert answers(ack_all(s, out, 1003, error))[21] == CommitResult((("t", 0, error),))


def test_a_restarted_static_member_keeps_the_generation():
    s = shard()
    joined = stable_member(s, instance="i-1")
    # A second static member, so the first is not the leader.
    out = s.join(20, join_req("", "i-2"), 5000)
    out += s.join(21, join_req(joined.member_id, "i-1"), 5000)
    got = answers(out)
    generation = got[21].generation  # type: ignore[union-attr]
    leader = got[21].leader  # type: ignore[union-attr]
    assert leader == joined.member_id
    other = got[20].member_id  # type: ignore[union-attr]
    sync = s.sync(
        22,
        SyncRequest(G, generation, leader, "i-1", None, None, ((leader, b"A"), (other, b"B"))),
        5001,
    )
    sync += s.sync(23, SyncRequest(G, generation, other, "i-2", None, None, ()), 5001)
    assert answers(ack_all(s, sync, 5002))[23].assignment == b"B"  # type: ignore[union-attr]
    # i-2 restarts: no member id, same instance id, same subscription.
    out = s.join(24, join_req("", "i-2"), 6000)
    back = answers(ack_all(s, out, 6001))[24]
    assert isinstance(back, JoinResult) and back.error == "NONE"
    assert back.generation == generation and back.member_id != other
    assert s.groups[G].state is GroupState.STABLE
    # The old member id is fenced.
    hb = answers(s.heartbeat(25, G, generation, other, "i-2", 6002))[25]
    assert hb == ErrorResult("FENCED_INSTANCE_ID")


@pytest.mark.parametrize("supports_skip", [True, False])
def test_a_restarted_static_leader_skips_the_assignment_only_where_the_client_can(
    supports_skip: bool,
) -> None:
    """KIP-814: a static leader restarting with the same subscription keeps the
    generation and is told to skip the assignment (JoinGroup v9+); a client that
    cannot be told (older versions, librdkafka's) is answered as Kafka does: the old
    leader id and no members, so it only syncs; no rebalance either way."""
    s = shard()
    joined = stable_member(s, instance="i-1")  # the leader
    generation = joined.generation
    restart = replace(join_req("", "i-1"), supports_skip_assignment=supports_skip)
    out = s.join(30, restart, 6000)
    back = answers(ack_all(s, out, 6001))[30]
    assert isinstance(back, JoinResult) and back.error == "NONE", back
    assert back.generation == generation and back.member_id != joined.member_id
    assert s.groups[G].state is GroupState.STABLE
    if supports_skip:
        assert back.skip_assignment and back.leader == back.member_id
        assert [m.member_id for m in back.members] == [back.member_id]
    else:
        assert not back.skip_assignment and back.leader == joined.member_id
        assert back.members == ()
    # Its SyncGroup (no assignments, as a skipping leader sends) returns what it had.
    out = s.sync(31, SyncRequest(G, generation, back.member_id, "i-1", None, None, ()), 6002)
    synced = answers(out)[31]  # a Stable group answers at once: nothing to store
    assert isinstance(synced, SyncResult) and synced.assignment == b"A", synced


def test_session_expiry_rebalances_and_empties_the_group():
    s = shard()
    joined = stable_member(s)
    s.tick(4000 + 9_999)  # the SyncGroup at 4000 refreshed the session
    assert s.groups[G].state is GroupState.STABLE
    out = s.tick(4000 + 10_000)
    group = s.groups[G]
    assert group.state is GroupState.EMPTY and group.generation == joined.generation + 1
    written = appends(out)
    assert len(written) == 1
    key, value = written[0].records[0]
    stored = rec.decode_group_metadata(value or b"")
    assert rec.decode_key(key) == rec.GroupMetadataKey(G) and stored.members == ()


def test_delete_group_at_the_session_deadline_sees_the_member_gone():
    """A timer due is applied before DeleteGroups is answered: the ticks come every
    100 ms, and librdkafka's 0081 deletes its static members' groups exactly a session
    after closing them (Kafka's precise timer has expired them by then)."""
    s = shard()
    stable_member(s)  # its session runs out at 4000 + 10_000
    out = s.delete_group(7, G, 4000 + 10_000)  # no tick ran at the deadline
    got = answers(out) | answers(ack_all(s, out, 4000 + 10_001))
    assert got[7] == ErrorResult("NONE"), got[7]  # was NON_EMPTY_GROUP
    assert G not in s.groups


def test_offsets_of_an_empty_group_expire_with_tombstones():
    s = shard(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    out = s.commit(1, G, -1, "", None, [CommitPartition("t", 3, 7)], 0)
    ack_all(s, out, 0)
    assert not appends(s.tick(59_000))
    out = s.tick(61_000)
    written = appends(out)
    assert written and all(v is None for _k, v in written[0].records)
    keys = {rec.decode_key(k) for k, _v in written[0].records}
    assert keys == {rec.OffsetCommitKey(G, "t", 3), rec.GroupMetadataKey(G)}
    ack_all(s, out, 61_001)
    assert G not in s.offsets and G not in s.groups


def test_replay_loads_the_last_value_of_each_key():
    s = CoordinatorShard(0, 7, GroupConfig(), random.Random(1))
    member = rec.MemberMetadata("m-1", None, "c", "/h", 10_000, 10_000, b"s", b"a")
    s.replay(
        rec.encode_key(rec.GroupMetadataKey(G)),
        rec.encode_value(rec.GroupMetadataValue("consumer", 4, "range", "m-1", 1, (member,))),
    )
    for offset in (5, 9):
        s.replay(
            rec.encode_key(rec.OffsetCommitKey(G, "t", 0)),
            rec.encode_value(rec.OffsetCommitValue(offset, -1, "", 1)),
        )
    s.replay(
        rec.encode_key(rec.OffsetCommitKey(G, "t", 1)),
        rec.encode_value(rec.OffsetCommitValue(3, -1, "", 1)),
    )
    s.replay(rec.encode_key(rec.OffsetCommitKey(G, "t", 1)), None)  # deleted
    assert s.loading is not None
    s.finish_loading(100)
    group = s.groups[G]
    assert group.state is GroupState.STABLE and group.generation == 4 and group.leader == "m-1"
    assert group.members["m-1"].assignment == b"a"
    assert {tp: v.offset for tp, v in s.offsets[G].items()} == {("t", 0): 9}


def test_coordinator_routes_and_fences_by_epoch():
    c = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=50), random.Random(1))
    p = c.partition_for(G)
    assert c.shard_for(G) == (None, "NOT_COORDINATOR")
    loading, _ = c.begin_loading(p, 3)
    assert c.shard_for(G) == (None, "COORDINATOR_LOAD_IN_PROGRESS")
    loading.finish_loading(0)
    assert c.shard_for(G)[0] is loading
    out = loading.commit(1, G, -1, "", None, [CommitPartition("t", 0, 1)], 0)
    write = appends(out)[0]
    newer, unloaded = c.begin_loading(p, 4)  # leadership changed before the ack
    assert answers(unloaded) == {1: CommitResult((("t", 0, "NOT_COORDINATOR"),))}
    assert c.on_write_done(p, 3, write.write_id, "NONE", 1) == []  # the old shard's: dropped
    assert c.shard_for("")[1] == "INVALID_GROUP_ID"


def test_a_commit_with_a_retention_time_expires_at_its_timestamp():
    s = shard(offsets_retention_check_interval_ms=1000)
    out = s.commit(1, G, -1, "", None, [CommitPartition("t", 0, 7)], 0, retention_ms=5000)
    value = rec.decode_offset_commit(appends(out)[0].records[0][1] or b"")
    assert value.expire_timestamp == 5000  # written as OffsetCommitValue v1
    ack_all(s, out, 0)
    assert not appends(s.tick(4000))
    written = appends(s.tick(6000))
    assert written and rec.decode_key(written[0].records[0][0]) == rec.OffsetCommitKey(G, "t", 0)


def test_a_sync_while_the_previous_generations_write_is_pending_is_stored():
    """A member joined while the last generation's assignment was still being written:
    the new leader's SyncGroup was dropped (one pending flag for every generation) and
    every member's SyncGroup waited out its request timeout."""
    s = shard(group_initial_rebalance_delay_ms=0)
    a_id = answers(s.join(1, join_req(), 0))[1].member_id  # type: ignore[union-attr]
    out = s.join(2, join_req(a_id), 0) + s.tick(1)
    gen1 = answers(out)[2]
    assert isinstance(gen1, JoinResult) and gen1.generation == 1
    first_write = s.sync(3, SyncRequest(G, 1, a_id, None, None, None, ((a_id, b"A1"),)), 2)
    assert len(appends(first_write)) == 1  # gen 1's assignment: written, not yet acked
    # B arrives: the group rebalances to generation 2 while gen 1's write is in flight.
    b_id = answers(s.join(4, join_req(), 3))[4].member_id  # type: ignore[union-attr]
    out = s.join(5, join_req(b_id), 3) + s.join(6, join_req(a_id), 4) + s.tick(5)
    joined = answers(out)
    gen2 = {r.member_id: r for r in joined.values() if isinstance(r, JoinResult)}
    assert {r.generation for r in gen2.values()} == {2}, joined
    leader = next(r for r in gen2.values() if r.members)
    other = next(m for m in gen2 if m != leader.member_id)
    assignment = ((leader.member_id, b"L2"), (other, b"O2"))
    second = s.sync(7, SyncRequest(G, 2, leader.member_id, None, None, None, assignment), 6)
    second += s.sync(8, SyncRequest(G, 2, other, None, None, None, ()), 6)
    assert len(appends(second)) == 1, "generation 2's assignment must be written"
    # Gen 1's write completes late; it must not undo generation 2's.
    assert not [r for r in answers(ack_all(s, first_write, 7)).values() if r.error == "NONE"]
    synced = answers(ack_all(s, second, 8))
    assert {k: v.assignment for k, v in synced.items()} == {7: b"L2", 8: b"O2"}  # type: ignore[union-attr]
    assert s.groups[G].state is GroupState.STABLE and s.groups[G].generation == 2


def subscription(topics: list[str], owned: list[tuple[str, int]], generation: int) -> bytes:
    """A ConsumerProtocolSubscription v2: topics, user data, owned partitions, generation."""
    out = struct.pack(">hi", 2, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)  # no user data
    out += struct.pack(">i", len(owned))
    for t, p in owned:
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">ii", 1, p)
    return out + struct.pack(">i", generation)


def test_a_static_member_restarting_with_the_same_topics_keeps_the_generation():
    """A consumer's subscription also carries the partitions it owned and its
    generation; a restart changes those, not what it subscribes to."""
    s = shard()
    joined = stable_member(s, instance="i-1")
    first = subscription(["t"], [], -1)
    out = s.join(20, join_req("", "i-2", meta=first), 5000)
    out += s.join(21, join_req(joined.member_id, "i-1"), 5000)
    got = answers(out)
    generation, leader = got[21].generation, got[21].leader  # type: ignore[union-attr]
    other = got[20].member_id  # type: ignore[union-attr]
    sync = s.sync(
        22,
        SyncRequest(G, generation, leader, "i-1", None, None, ((leader, b"A"), (other, b"B"))),
        5001,
    )
    sync += s.sync(23, SyncRequest(G, generation, other, "i-2", None, None, ()), 5001)
    ack_all(s, sync, 5002)
    restarted = subscription(["t"], [("t", 1), ("t", 3)], generation)
    back = answers(ack_all(s, s.join(24, join_req("", "i-2", meta=restarted), 6000), 6001))[24]
    assert isinstance(back, JoinResult) and back.generation == generation
    assert s.groups[G].state is GroupState.STABLE
    # Another topic is a real change: the group rebalances.
    moved = subscription(["t", "u"], [], generation)
    out = s.join(25, join_req("", "i-2", meta=moved), 7000)
    assert s.groups[G].state is GroupState.PREPARING_REBALANCE, answers(out)
