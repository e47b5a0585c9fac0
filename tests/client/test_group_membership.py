"""The consumer's group membership state machine (no I/O): its requests, its
answers to each response and error code (Kafka's consumer rules), the poll and
session timers, and the partition steps it hands the application thread."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.client.assignors import make_assignors
from seglog.client.cluster import TopicPartition
from seglog.client.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from seglog.client.errors import KafkaError
from seglog.client.group_membership import (
    ASSIGN,
    FIND,
    HEARTBEAT,
    JOIN,
    LEAVE,
    SYNC,
    Assign,
    GroupMembership,
    Lost,
    MembershipConfig,
    MemberState,
    PrepareJoin,
    Send,
)
from seglog.proto import errors_pb2
from seglog.proto import groups_pb2 as gpb

E = errors_pb2.ErrorCode
TP = TopicPartition


def membership(
    strategy: str = "range", instance: str | None = None, now: float = 0.0
) -> GroupMembership:
    config = MembershipConfig(
        group_id="g",
        group_instance_id=instance,
        client_id="c",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=60_000,
        heartbeat_interval_ms=1_000,
        max_poll_interval_ms=60_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1_000,
    )
    return GroupMembership(config, make_assignors(strategy), now, random.Random(1))


def find(m: GroupMembership, now: float = 0.0) -> None:
    send = m.next_request(now)
    assert send is not None and send.kind == FIND
    assert send.request.key == "g"
    m.on_find_coordinator(now, gpb.FindCoordinatorResponse(node_id=2, host="127.0.0.1", port=9000))
    assert m.coordinator is not None and m.coordinator.node_id == 2


def prepare(m: GroupMembership) -> PrepareJoin:
    step = m.app_step()
    assert isinstance(step, PrepareJoin)
    m.app_done(step)
    return step


def join_as_follower(
    m: GroupMembership,
    now: float,
    assigned: list[TopicPartition],
    generation: int = 1,
    send: Send | None = None,
) -> Assign:
    """Join (with the JoinGroup `send` already taken, if given) and sync as a follower."""
    send = send or m.next_request(now)
    assert send is not None and send.kind == JOIN, send
    m.on_join_group(
        now,
        gpb.JoinGroupResponse(
            generation_id=generation,
            protocol_name=m.assignors[0].name,
            leader="other",
            member_id=send.request.member_id or "me",
        ),
    )
    send = m.next_request(now)
    assert send is not None and send.kind == SYNC and not send.request.assignments
    m.on_sync_group(now, gpb.SyncGroupResponse(assignment=encode_assignment(assigned)))
    step = m.app_step()
    assert isinstance(step, Assign)
    m.app_done(step)
    assert m.state is MemberState.STABLE and m.owned == frozenset(assigned)
    return step


def stable(strategy: str = "range", assigned: list | None = None, **kw: object) -> GroupMembership:
    m = membership(strategy, **kw)  # type: ignore[arg-type]
    m.set_subscription(["t"])
    find(m)
    prepare(m)
    join_as_follower(m, 0.0, assigned if assigned is not None else [TP("t", 0), TP("t", 1)])
    return m


# --- joining ---------------------------------------------------------------------------


def test_nothing_to_do_until_subscribed() -> None:
    m = membership()
    assert m.next_request(0.0) is None
    assert m.app_step() is None


def test_join_with_member_id_required_then_lead_the_assignment() -> None:
    m = membership("roundrobin")
    m.set_subscription(["t"])
    find(m)
    assert m.next_request(0.0) is None  # the application must prepare first
    assert prepare(m).revoked == frozenset()
    send = m.next_request(0.0)
    assert send.kind == JOIN and send.request.member_id == ""
    assert [p.name for p in send.request.protocols] == ["roundrobin"]
    assert decode_subscription(send.request.protocols[0].metadata).topics == ("t",)
    m.on_join_group(0.0, gpb.JoinGroupResponse(error_code=E.MEMBER_ID_REQUIRED, member_id="m-1"))
    send = m.next_request(0.0)
    assert send.kind == JOIN and send.request.member_id == "m-1"  # at once, with the id
    sub = encode_subscription(Subscription(("t",)))
    m.on_join_group(
        0.0,
        gpb.JoinGroupResponse(
            generation_id=1,
            protocol_name="roundrobin",
            leader="m-1",
            member_id="m-1",
            members=[
                gpb.JoinGroupMember(member_id="m-1", metadata=sub),
                gpb.JoinGroupMember(member_id="m-2", metadata=sub),
            ],
        ),
    )
    send = m.next_request(0.0)
    assert send.kind == ASSIGN and send.topics == frozenset({"t"})
    m.on_assignment_input(0.0, {"t": 4})
    send = m.next_request(0.0)
    assert send.kind == SYNC and send.request.generation_id == 1
    given_out = {a.member_id: decode_assignment(a.assignment) for a in send.request.assignments}
    assert given_out == {"m-1": [TP("t", 0), TP("t", 2)], "m-2": [TP("t", 1), TP("t", 3)]}
    m.on_sync_group(0.0, gpb.SyncGroupResponse(assignment=send.request.assignments[0].assignment))
    step = m.app_step()
    assert step == Assign(frozenset(given_out["m-1"]), frozenset(given_out["m-1"]), frozenset())
    m.app_done(step)
    assert m.generation_if_stable() == (1, "m-1")
    assert m.leader_counts == {"t": 4}
    m.check_metadata({"t": 6})  # partitions were added: the leader rebalances
    assert m.rejoin_needed


def lone_leader_of_a_topic_not_yet_seen() -> tuple[GroupMembership, Send]:
    """A group's only member, subscribed to `new`, leading generation 1 with no
    partitions to give (the topic is not in its metadata yet): its SyncGroup."""
    m = membership()
    m.set_subscription(["new"])
    find(m)
    prepare(m)
    m.next_request(0.0)
    sub = encode_subscription(Subscription(("new",)))
    m.on_join_group(
        0.0,
        gpb.JoinGroupResponse(
            generation_id=1,
            protocol_name="range",
            leader="me",
            member_id="me",
            members=[gpb.JoinGroupMember(member_id="me", metadata=sub)],
        ),
    )
    assert m.next_request(0.0).kind == ASSIGN
    m.on_assignment_input(0.0, {})  # just created: not in the metadata yet
    send = m.next_request(0.0)
    assert send is not None and send.kind == SYNC
    assert decode_assignment(send.request.assignments[0].assignment) == []
    return m, send


def test_the_leader_assigns_a_topic_once_it_appears_in_the_metadata() -> None:
    m, send = lone_leader_of_a_topic_not_yet_seen()
    m.on_sync_group(0.0, gpb.SyncGroupResponse(assignment=send.request.assignments[0].assignment))
    m.app_done(m.app_step())
    assert m.leader_counts == {"new": 0} and not m.rejoin_needed
    m.check_metadata({"new": 4})
    assert m.rejoin_needed


def test_a_topic_seen_while_the_leaders_sync_is_in_flight_is_assigned_after_it() -> None:
    """The metadata that shows the new topic can arrive between the leader's count
    and its SyncGroup's answer; the member must still rejoin once Stable (CI once saw
    a lone static member hold nothing for 30 s)."""
    m, send = lone_leader_of_a_topic_not_yet_seen()
    m.check_metadata({"new": 4})  # while the SyncGroup travels
    m.on_sync_group(0.0, gpb.SyncGroupResponse(assignment=send.request.assignments[0].assignment))
    assert m.rejoin_needed
    m.app_done(m.app_step())
    assert m.rejoin_needed


def test_coordinator_lookup_backs_off_and_counts() -> None:
    m = membership()
    m.set_subscription(["t"])
    assert m.next_request(0.0).kind == FIND
    m.on_find_coordinator(0.0, gpb.FindCoordinatorResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
    assert m.coordinator is None
    assert m.next_request(0.05) is None  # backing off (100 ms +- 20%)
    assert m.next_request(0.2).kind == FIND
    m.on_failure(0.2, FIND, KafkaError("connection refused"))
    assert m.counters.values["coordinator-lookup-failed-total"] == 2
    assert "connection refused" in m.last_coordinator_error
    assert m.next_request(0.25) is None
    assert m.next_request(0.7).kind == FIND  # 200 ms +- 20% after the second failure


def test_fatal_join_errors_are_raised_to_the_application() -> None:
    m = membership(instance="static-1")
    m.set_subscription(["t"])
    find(m)
    prepare(m)
    assert m.next_request(0.0).request.group_instance_id == "static-1"
    m.on_join_group(0.0, gpb.JoinGroupResponse(error_code=E.FENCED_INSTANCE_ID))
    with pytest.raises(KafkaError, match="FENCED_INSTANCE_ID"):
        m.app_step()
    assert m.next_request(1.0) is None


@pytest.mark.parametrize(
    "code,keeps_member_id",
    [(E.UNKNOWN_MEMBER_ID, False), (E.ILLEGAL_GENERATION, True)],
)
def test_join_errors_reset_the_generation_and_retry(code: int, keeps_member_id: bool) -> None:
    m = stable()
    m.request_rejoin()
    step = prepare(m)
    assert step.revoked == {TP("t", 0), TP("t", 1)}  # eager: everything first
    send = m.next_request(5.0)
    assert send.kind == JOIN and send.request.member_id == "me"
    m.on_join_group(5.0, gpb.JoinGroupResponse(error_code=code))
    assert (m.member_id == "me") == keeps_member_id
    assert m.generation == -1
    assert m.next_request(5.0) is None  # backs off
    send = m.next_request(6.0)
    assert send.kind == JOIN


def test_coordinator_moves_during_join_then_found_again() -> None:
    m = membership()
    m.set_subscription(["t"])
    find(m)
    prepare(m)
    m.next_request(0.0)
    m.on_join_group(0.0, gpb.JoinGroupResponse(error_code=E.NOT_COORDINATOR))
    assert m.coordinator is None and m.state is MemberState.UNJOINED
    assert m.next_request(0.05) is None  # not at once: after the retry backoff
    find(m, 0.2)
    assert m.next_request(0.2).kind == JOIN


# --- stable ----------------------------------------------------------------------------


def test_heartbeats_at_the_interval() -> None:
    m = stable()
    assert m.next_request(0.5) is None
    send = m.next_request(1.0)
    assert send.kind == HEARTBEAT
    assert (send.request.generation_id, send.request.member_id) == (1, "me")
    assert m.next_request(1.1) is None  # one at a time
    m.on_heartbeat(1.1, gpb.HeartbeatResponse())
    assert m.next_request(1.5) is None
    assert m.next_request(2.0).kind == HEARTBEAT


def test_rebalance_in_progress_eager_revokes_everything_before_rejoining() -> None:
    m = stable()
    m.next_request(1.0)
    m.on_heartbeat(1.0, gpb.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    assert m.rejoin_needed and m.state is MemberState.STABLE
    assert m.next_request(2.0).kind == HEARTBEAT  # still heartbeating until prepared
    m.on_heartbeat(2.0, gpb.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    assert prepare(m).revoked == {TP("t", 0), TP("t", 1)}
    send = m.next_request(2.5)
    assert send.kind == JOIN
    assert decode_subscription(send.request.protocols[0].metadata).owned_partitions == frozenset()
    step = join_as_follower(m, 2.5, [TP("t", 1)], generation=2, send=send)
    assert step.added == {TP("t", 1)} and step.revoked == frozenset()
    assert not m.rejoin_needed


def test_cooperative_keeps_partitions_and_revokes_only_what_moves() -> None:
    m = stable("cooperative-sticky", [TP("t", 0), TP("t", 1)])
    m.next_request(1.0)
    m.on_heartbeat(1.0, gpb.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    assert prepare(m).revoked == frozenset()
    send = m.next_request(1.5)
    sub = decode_subscription(send.request.protocols[0].metadata)
    assert sub.owned_partitions == {TP("t", 0), TP("t", 1)} and sub.generation_id == 1
    step = join_as_follower(m, 1.5, [TP("t", 0)], generation=2, send=send)
    assert step.revoked == {TP("t", 1)} and step.added == frozenset()
    assert m.rejoin_needed  # the second rebalance hands t-1 on
    assert prepare(m).revoked == frozenset()
    step = join_as_follower(m, 2.0, [TP("t", 0)], generation=3)
    assert step.revoked == frozenset() and not m.rejoin_needed


@pytest.mark.parametrize(
    "code,member_after", [(E.UNKNOWN_MEMBER_ID, ""), (E.ILLEGAL_GENERATION, "me")]
)
def test_lost_generation_means_lost_partitions(code: int, member_after: str) -> None:
    m = stable("cooperative-sticky")
    m.next_request(1.0)
    m.on_heartbeat(1.0, gpb.HeartbeatResponse(error_code=code))
    step = m.app_step()
    assert step == Lost(frozenset({TP("t", 0), TP("t", 1)}))
    m.app_done(step)
    prepare(m)
    send = m.next_request(1.5)
    assert send.kind == JOIN and send.request.member_id == member_after
    sub = decode_subscription(send.request.protocols[0].metadata)
    assert sub.owned_partitions == frozenset() and sub.generation_id == -1


def test_heartbeat_coordinator_errors_rediscover_and_keep_the_generation() -> None:
    m = stable()
    m.next_request(1.0)
    m.on_heartbeat(1.0, gpb.HeartbeatResponse(error_code=E.NOT_COORDINATOR))
    assert m.coordinator is None and m.generation == 1
    find(m, 1.2)
    assert m.next_request(2.0).kind == HEARTBEAT


def test_session_timeout_without_answers_rediscovers() -> None:
    m = stable()
    assert m.next_request(1.0).kind == HEARTBEAT
    m.on_failure(1.0, HEARTBEAT, KafkaError("no answer"))
    assert m.coordinator is None and m.generation == 1  # the member stays
    assert m.next_request(1.05) is None
    find(m, 1.2)
    # A coordinator that answers nothing for a whole session is given up on too.
    m.next_request(2.2)  # a heartbeat that never completes
    m.in_flight = None
    assert m.next_request(11.5) is None  # found dead; asked again after the backoff
    assert "session timeout" in m.last_coordinator_error
    assert m.next_request(11.7).kind == FIND


def test_poll_timeout_leaves_then_rejoins_with_partitions_lost() -> None:
    m = stable()
    m.poll(0.0)
    t = 1.0
    while t < 60.0:
        send = m.next_request(t)
        if send is not None:
            m.on_heartbeat(t, gpb.HeartbeatResponse())
        t += 1.0
    send = m.next_request(61.0)
    assert send.kind == LEAVE
    assert send.request.members[0].member_id == "me"
    assert "poll timeout" in send.request.members[0].reason
    m.on_leave_group(61.0, gpb.LeaveGroupResponse())
    assert m.counters.values["poll-timeout-leave-total"] == 1
    m.poll(70.0)
    step = m.app_step()
    assert isinstance(step, Lost) and step.lost == {TP("t", 0), TP("t", 1)}
    m.app_done(step)
    prepare(m)
    assert m.next_request(70.0).request.member_id == ""


def test_leave_dynamic_sends_leave_static_does_not() -> None:
    m = stable()
    m.leave(2.0, "closing")
    send = m.next_request(2.0)
    assert send.kind == LEAVE and send.request.members[0].member_id == "me"
    m.on_leave_group(2.0, gpb.LeaveGroupResponse())
    assert m.next_request(3.0) is None
    s = stable(instance="i-1")
    s.leave(2.0, "closing")
    assert s.next_request(2.0) is None  # a static member's session ends it


def test_answers_after_leaving_are_ignored() -> None:
    m = membership()
    m.set_subscription(["t"])
    find(m)
    prepare(m)
    m.next_request(0.0)
    m.on_join_group(
        0.0,
        gpb.JoinGroupResponse(generation_id=1, leader="x", member_id="me", protocol_name="range"),
    )
    assert m.next_request(0.0).kind == SYNC
    m.leave(0.1, "closing")
    m.on_sync_group(0.2, gpb.SyncGroupResponse(assignment=encode_assignment([TP("t", 0)])))
    assert m.state is MemberState.UNJOINED and m.pending_assignment is None
    assert m.app_step() is None


def test_commit_errors_apply_kafkas_rules() -> None:
    m = stable()
    m.on_commit_error(1.0, E.REBALANCE_IN_PROGRESS)
    assert m.rejoin_needed and m.generation == 1
    m = stable()
    m.on_commit_error(1.0, E.ILLEGAL_GENERATION)
    assert m.generation == -1 and m.member_id == "me"
    assert isinstance(m.app_step(), Lost)
    m = stable()
    m.on_commit_error(1.0, E.NOT_COORDINATOR)
    assert m.coordinator is None and m.generation == 1


def test_sync_errors() -> None:
    m = membership()
    m.set_subscription(["t"])
    find(m)
    prepare(m)
    m.next_request(0.0)
    m.on_join_group(
        0.0,
        gpb.JoinGroupResponse(generation_id=3, leader="x", member_id="me", protocol_name="range"),
    )
    m.next_request(0.0)
    m.on_sync_group(0.0, gpb.SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS))
    assert m.state is MemberState.UNJOINED and m.member_id == "me"
    assert m.next_request(0.0).kind == JOIN  # prepared already: straight back in


# --- any sequence of answers --------------------------------------------------------------

_CODES = [
    E.NONE,
    E.REBALANCE_IN_PROGRESS,
    E.UNKNOWN_MEMBER_ID,
    E.ILLEGAL_GENERATION,
    E.NOT_COORDINATOR,
    E.COORDINATOR_NOT_AVAILABLE,
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.MEMBER_ID_REQUIRED,
]


@settings(max_examples=200, deadline=None)
@given(
    strategy=st.sampled_from(["range", "cooperative-sticky"]),
    answers=st.lists(st.tuples(st.sampled_from(_CODES), st.booleans(), st.integers(0, 3))),
)
def test_any_answers_keep_the_invariants(strategy, answers) -> None:
    """Whatever the coordinator answers, one request at a time, partitions are only
    ever owned through an assignment, and the member keeps trying (no fatal error
    among these retriable codes)."""
    m = membership(strategy)
    m.set_subscription(["t"])
    now = 0.0
    for code, transport_failure, n in answers:
        now += 0.7
        m.poll(now)
        for _ in range(4):
            step = m.app_step()
            if step is None:
                break
            if isinstance(step, Assign):
                assert step.assigned == m.pending_assignment
            m.app_done(step)
        send = m.next_request(now)
        if send is None:
            continue
        assert m.in_flight == send.kind
        assert m.next_request(now) is None
        if transport_failure:
            m.on_failure(now, send.kind, KafkaError("down"))
            continue
        if code == E.MEMBER_ID_REQUIRED and send.kind != JOIN:
            code = E.NONE  # only JoinGroup answers it
        if send.kind == FIND:
            if code == E.NONE:
                m.on_find_coordinator(now, gpb.FindCoordinatorResponse(node_id=1, host="h", port=1))
            else:
                m.on_find_coordinator(now, gpb.FindCoordinatorResponse(error_code=code))
        elif send.kind == JOIN:
            mid = send.request.member_id or f"m{n}"
            m.on_join_group(
                now,
                gpb.JoinGroupResponse(
                    error_code=code,
                    generation_id=n + 1,
                    leader="other",
                    member_id=mid,
                    protocol_name=m.assignors[0].name,
                ),
            )
        elif send.kind == SYNC:
            tps = [TP("t", p) for p in range(n)]
            m.on_sync_group(
                now, gpb.SyncGroupResponse(error_code=code, assignment=encode_assignment(tps))
            )
        elif send.kind == HEARTBEAT:
            m.on_heartbeat(now, gpb.HeartbeatResponse(error_code=code))
        elif send.kind == LEAVE:
            m.on_leave_group(now, gpb.LeaveGroupResponse(error_code=code))
        elif send.kind == ASSIGN:
            m.on_assignment_input(now, {"t": 4})
        assert m.fatal_error is None
        if m.state is MemberState.STABLE and m.pending_assignment is None:
            assert m.generation >= 1
