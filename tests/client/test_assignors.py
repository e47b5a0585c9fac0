"""The partition assignors (pure): every subscribed partition assigned exactly once,
Kafka's range and roundrobin layouts, and cooperative-sticky's stickiness and
incremental (two-generation) moves, checked with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.client.assignors import (
    COOPERATIVE,
    EAGER,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    make_assignors,
    rebalance_protocol,
)
from seglog.client.cluster import TopicPartition
from seglog.client.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

TP = TopicPartition
ALL = [RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()]

topics_st = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1, max_size=4
)


@st.composite
def groups(draw: st.DrawFn, same_subscription: bool = False) -> tuple[dict, dict]:
    counts = draw(topics_st)
    names = sorted(counts)
    n = draw(st.integers(1, 7))
    subs = {}
    for i in range(n):
        if same_subscription:
            topics = tuple(names)
        else:
            topics = tuple(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        subs[f"m{i}"] = Subscription(topics)
    return counts, subs


def wanted(counts: dict, subs: dict) -> set[TopicPartition]:
    topics = {t for s in subs.values() for t in s.topics}
    return {TP(t, p) for t in topics for p in range(counts.get(t, 0))}


def check_exactly_once(result: dict, counts: dict, subs: dict) -> None:
    assert set(result) == set(subs)
    flat = [tp for tps in result.values() for tp in tps]
    assert len(flat) == len(set(flat)), "a partition assigned twice"
    assert set(flat) == wanted(counts, subs)
    for m, tps in result.items():
        assert all(tp.topic in subs[m].topics for tp in tps), "assigned an unsubscribed topic"


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_every_partition_assigned_exactly_once(assignor, group) -> None:
    counts, subs = group
    check_exactly_once(assignor.assign(counts, subs), counts, subs)


@pytest.mark.parametrize(
    "assignor", [RoundRobinAssignor(), CooperativeStickyAssignor()], ids=lambda a: a.name
)
@settings(max_examples=150, deadline=None)
@given(group=groups(same_subscription=True))
def test_balanced_within_one_with_equal_subscriptions(assignor, group) -> None:
    counts, subs = group
    sizes = [len(tps) for tps in assignor.assign(counts, subs).values()]
    assert max(sizes) - min(sizes) <= 1


def test_range_is_per_topic_contiguous_with_the_first_members_taking_the_extra() -> None:
    subs = {"c1": Subscription(("t0", "t1")), "c0": Subscription(("t0", "t1"))}
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    # Kafka's documented example: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
    assert got == {
        "c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "c1": [TP("t0", 2), TP("t1", 2)],
    }


def test_range_static_members_sort_by_instance_id_first() -> None:
    subs = {
        "a-dynamic": Subscription(("t",)),
        "z-static": Subscription(("t",), group_instance_id="i0"),
    }
    got = RangeAssignor().assign({"t": 3}, subs)
    assert got["z-static"] == [TP("t", 0), TP("t", 1)]
    assert got["a-dynamic"] == [TP("t", 2)]


def test_roundrobin_deals_across_topics_in_turn() -> None:
    subs = {"c0": Subscription(("t0", "t1")), "c1": Subscription(("t0", "t1"))}
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    # Kafka's example: C0 [t0p0, t0p2, t1p1], C1 [t0p1, t1p0, t1p2].
    assert got == {
        "c0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
        "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)],
    }


def test_roundrobin_skips_members_not_subscribed() -> None:
    subs = {"c0": Subscription(("t0",)), "c1": Subscription(("t0", "t1"))}
    got = RoundRobinAssignor().assign({"t0": 2, "t1": 2}, subs)
    assert got == {"c0": [TP("t0", 0)], "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 1)]}


# --- cooperative-sticky ---------------------------------------------------------------


def owned_subs(assignment: dict, topics: tuple[str, ...], generation: int) -> dict:
    return {m: Subscription(topics, frozenset(tps), generation) for m, tps in assignment.items()}


def run_cooperative(counts: dict, members: list[str], owned: dict, generation: int) -> dict:
    """Rebalances until stable (at most 3), checking at each generation that no
    partition is handed to a member while another member still owns it."""
    topics = tuple(sorted(counts))
    assignor = CooperativeStickyAssignor()
    state = {m: list(owned.get(m, [])) for m in members}
    for round_ in range(3):
        subs = owned_subs(state, topics, generation)
        got = assignor.assign(counts, subs)
        for m, tps in got.items():
            for tp in tps:
                others = [o for o in members if o != m and tp in state[o]]
                assert not others, f"round {round_}: {tp} given to {m} while {others} own it"
        revoked = any(set(state[m]) - set(got[m]) for m in members)
        state = got
        generation += 1
        if not revoked:
            return state
    raise AssertionError("no stable assignment after three rebalances")


@settings(max_examples=100, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from(["a", "b"]), st.integers(1, 12), min_size=1),
    before=st.integers(1, 5),
    after=st.integers(1, 5),
)
def test_cooperative_sticky_membership_change_is_incremental(counts, before, after) -> None:
    old = [f"m{i}" for i in range(before)]
    new = [f"m{i}" for i in range(after)]
    start = run_cooperative(counts, old, {}, 1)
    end = run_cooperative(counts, new, {m: start[m] for m in new if m in start}, 5)
    topics = tuple(sorted(counts))
    check_exactly_once(end, counts, {m: Subscription(topics) for m in new})
    sizes = [len(v) for v in end.values()]
    assert max(sizes) - min(sizes) <= 1
    # Sticky: a member that stays keeps min(what it had, its new share) of its partitions.
    total = sum(counts.values())
    floor_share = total // len(new)
    for m in new:
        if m in start:
            kept = set(start[m]) & set(end[m])
            assert len(kept) >= min(len(start[m]), floor_share)


def test_cooperative_sticky_joining_member_revokes_only_what_moves() -> None:
    counts = {"t": 6}
    first = CooperativeStickyAssignor().assign(counts, {"a": Subscription(("t",))})
    assert first == {"a": [TP("t", p) for p in range(6)]}
    subs = {
        "a": Subscription(("t",), frozenset(first["a"]), 1),
        "b": Subscription(("t",), frozenset(), 1),
    }
    second = CooperativeStickyAssignor().assign(counts, subs)
    assert len(second["a"]) == 3 and second["b"] == []  # b waits for a to revoke
    subs = {
        "a": Subscription(("t",), frozenset(second["a"]), 2),
        "b": Subscription(("t",), frozenset(), 2),
    }
    third = CooperativeStickyAssignor().assign(counts, subs)
    assert third["a"] == second["a"]
    assert set(third["b"]) == set(first["a"]) - set(second["a"])


def test_cooperative_sticky_highest_generation_wins_and_ties_wait() -> None:
    counts = {"t": 2}
    stale = {
        "a": Subscription(("t",), frozenset({TP("t", 0)}), 3),
        "b": Subscription(("t",), frozenset({TP("t", 0)}), 2),
    }
    got = CooperativeStickyAssignor().assign(counts, stale)
    assert got["a"] == [TP("t", 0)] and TP("t", 0) not in got["b"]
    tied = {
        "a": Subscription(("t",), frozenset({TP("t", 0)}), 3),
        "b": Subscription(("t",), frozenset({TP("t", 0)}), 3),
    }
    got = CooperativeStickyAssignor().assign(counts, tied)
    assert TP("t", 0) not in got["a"] + got["b"]


# --- configuration and wire bytes --------------------------------------------------------


def test_strategy_names_and_protocol() -> None:
    assert [a.name for a in make_assignors("range,cooperative-sticky")] == [
        "range",
        "cooperative-sticky",
    ]
    assert rebalance_protocol(make_assignors(["range", "cooperative-sticky"])) == EAGER
    assert rebalance_protocol(make_assignors(["cooperative-sticky"])) == COOPERATIVE
    names = [a.name for a in make_assignors(["org.apache.kafka.clients.consumer.RangeAssignor"])]
    assert names == ["range"]
    with pytest.raises(ValueError, match="'sticky' is unknown"):
        make_assignors("sticky")
    with pytest.raises(ValueError, match="twice"):
        make_assignors(["range", "range"])


def test_consumer_protocol_round_trip_and_old_versions() -> None:
    sub = Subscription(("b", "a"), frozenset({TP("a", 1), TP("a", 0)}), 7)
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == ("a", "b")
    assert back.owned_partitions == sub.owned_partitions and back.generation_id == 7
    # Version 0 (what older clients send): topics and user data only.
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    old = decode_subscription(v0)
    assert old.topics == ("t",) and old.owned_partitions == frozenset()
    assert old.generation_id == -1
    tps = [TP("b", 0), TP("a", 2), TP("a", 1)]
    assert decode_assignment(encode_assignment(tps)) == sorted(
        tps, key=lambda tp: (tp.topic, tp.partition)
    )
    assert decode_assignment(b"") == []
    with pytest.raises(ValueError, match="ConsumerProtocolSubscription"):
        decode_subscription(b"\x00")
