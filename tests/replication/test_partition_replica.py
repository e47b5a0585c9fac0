"""PartitionReplica against the rules and worked examples of docs/replication-rules.md."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from seglog.controller.metadata_image import PartitionState
from seglog.replication.fetch_state import FetchEvent
from seglog.replication.partition_replica import (
    EARLIEST_TIMESTAMP,
    FENCED_LEADER_EPOCH,
    FLUSH_LOG,
    INVALID_UPDATE_VERSION,
    LATEST_TIMESTAMP,
    NEVER,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    AlterPartitionResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchState,
    HighWatermarkUpdated,
    ListOffsetsRequest,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionReplica,
    ProduceCompleted,
    ReplicaConfig,
    ReplicaInvariantError,
    SendAlterPartition,
)
from seglog.sim.memory_log import MemoryLog
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch, iter_batches

T0 = 1_700_000_000_000
LAG = 10_000


def batch(n: int = 1, tag: str = "m", *, pid: int = -1, seq: int = -1) -> bytes:
    records = [NewRecord(f"{tag}{i}".encode(), None, T0) for i in range(n)]
    return build_batch(
        records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq
    )


def st(
    leader: int, epoch: int, partition_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]
) -> PartitionState:
    return PartitionState(replicas, isr, leader, epoch, partition_epoch)


def cfg(**kw: object) -> ReplicaConfig:
    base = ReplicaConfig(
        min_insync_replicas=1,
        replica_lag_time_max_ms=LAG,
        replica_fetch_backoff_ms=100,
        replica_request_timeout_ms=1_000,
        alter_partition_retry_ms=500,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def make(node_id: int, log: MemoryLog | None = None, **kw: object) -> PartitionReplica:
    return PartitionReplica(node_id, log or MemoryLog(f"n{node_id}"), cfg(**kw), broker_epoch=1)


def exchange(follower: PartitionReplica, nodes: dict[int, PartitionReplica], now: int) -> object:
    """One follower round trip; returns the leader's response (None if nothing was sent)."""
    out = follower.next_request(now)
    if out is None:
        return None
    leader = nodes[out.destination]
    req = out.request
    if isinstance(req, FetchRequest):
        resp, _ = leader.handle_fetch(req, now)
    elif isinstance(req, OffsetsForLeaderEpochRequest):
        resp = leader.handle_offsets_for_leader_epoch(req)
    else:
        resp = leader.handle_list_offsets(req)
    follower.handle_response(resp, now)
    return resp


def log_bytes(log: MemoryLog) -> bytes:
    return bytes(log.prefix(log.log_end_offset))


def epochs(log: MemoryLog) -> list[tuple[int, int]]:
    return [tuple(e) for e in log.epoch_cache.entries()]


def fill(log: MemoryLog, epoch: int, count: int, tag: str, per_batch: int = 10) -> None:
    """Append `count` records written by a leader of `epoch` (log level)."""
    while count > 0:
        n = min(per_batch, count)
        log.append_as_leader(batch(n, tag), epoch, time_ms=0)
        count -= n


def copy_prefix(src: MemoryLog, dst: MemoryLog, end: int) -> None:
    """What a follower would hold after fetching `src` up to `end` (verbatim)."""
    data = bytes(src.prefix(end))
    if data:
        dst.append_as_follower(data)


# --- 6.5 worked example -------------------------------------------------------------


def test_diverging_epoch_worked_example_6_5() -> None:
    origin = MemoryLog("epoch0-leader")
    fill(origin, 0, 120, "a")
    leader_log, follower_log = MemoryLog("leader"), MemoryLog("follower")
    copy_prefix(origin, leader_log, 120)
    copy_prefix(origin, follower_log, 100)
    fill(follower_log, 1, 50, "b")  # the follower led epoch 1 and wrote 100..149
    assert epochs(follower_log) == [(0, 0), (1, 100)]

    leader, follower = make(1, leader_log), make(2, follower_log)
    meta = st(1, 2, 5, (1, 2), (1, 2))
    leader.apply_metadata(meta, 0)
    fill(leader_log, 2, 80, "c")
    assert epochs(leader_log) == [(0, 0), (2, 120)] and leader_log.log_end_offset == 200
    follower.apply_metadata(meta, 0)
    nodes = {1: leader, 2: follower}

    out = follower.next_request(1)
    assert out is not None and out.destination == 1
    req = out.request
    assert isinstance(req, FetchRequest)
    assert (req.fetch_offset, req.last_fetched_epoch, req.current_leader_epoch) == (150, 1, 2)
    resp, _ = leader.handle_fetch(req, 1)
    assert resp.error == NONE and resp.records == b""
    assert resp.diverging_epoch == EpochEndOffset(0, 120)
    follower.handle_response(resp, 1)
    assert follower_log.log_end_offset == 100  # min(120, 100, 150)
    assert epochs(follower_log) == [(0, 0)]

    out = follower.next_request(2)
    assert out is not None and isinstance(out.request, FetchRequest)
    assert (out.request.fetch_offset, out.request.last_fetched_epoch) == (100, 0)
    resp, _ = leader.handle_fetch(out.request, 2)
    assert resp.diverging_epoch is None and resp.records
    follower.handle_response(resp, 2)
    while follower_log.log_end_offset < 200:
        exchange(follower, nodes, 3)
    assert log_bytes(follower_log) == log_bytes(leader_log)
    assert epochs(follower_log) == [(0, 0), (2, 120)]
    assert follower.is_synced_follower()


# --- 6.7 KIP-101 scenarios ------------------------------------------------------------


def test_kip101_scenario_1_restart_does_not_truncate_to_the_high_watermark() -> None:
    a_log, b_log = MemoryLog("A"), MemoryLog("B")
    b, a = make(2, b_log), make(1, a_log)
    meta = st(2, 0, 0, (2, 1), (2, 1))
    b.apply_metadata(meta, 0)
    a.apply_metadata(meta, 0)
    nodes = {1: a, 2: b}
    b.produce(1, batch(1, "m1"), -1, 30_000, 0)
    exchange(a, nodes, 1)  # A gets m1
    exchange(a, nodes, 1)  # B learns it: HW 1
    acks = b.produce(2, batch(1, "m2"), -1, 30_000, 2)
    assert acks == []  # parked: A has not fetched m2 yet
    exchange(a, nodes, 3)  # A appends m2; the response carries the old HW 1
    assert (a_log.log_end_offset, a_log.high_watermark) == (2, 1)
    out = a.next_request(4)
    assert out is not None and isinstance(out.request, FetchRequest)
    resp, actions = b.handle_fetch(out.request, 4)  # B learns A has m2: HW 2, m2 acked
    assert b_log.high_watermark == 2
    assert ProduceCompleted(2, NONE, -1, 1, -1, 0) in actions
    # Step 3: A restarts (the response is lost) and comes back as a follower.
    a_log.flush()
    a_log.checkpoint_high_watermark()
    a_log = a_log.crash()
    assert (a_log.log_end_offset, a_log.high_watermark) == (2, 1)
    a = make(1, a_log)
    a.apply_metadata(meta, 5)
    assert a_log.log_end_offset == 2  # with epochs: no truncation to the HW
    out = a.next_request(6)
    assert out is not None and isinstance(out.request, FetchRequest)
    assert (out.request.fetch_offset, out.request.last_fetched_epoch) == (2, 0)
    # Step 4: B fails before A re-fetches; A is elected and m2 survives.
    a.apply_metadata(st(1, 1, 1, (2, 1), (1,)), 7)
    assert a.is_leader and a_log.log_end_offset == 2
    assert epochs(a_log) == [(0, 0), (1, 2)]


def test_kip101_scenario_2_divergence_after_double_power_failure() -> None:
    a_log, b_log = MemoryLog("A"), MemoryLog("B")
    fill(a_log, 0, 1, "m1")
    copy_prefix(a_log, b_log, 1)
    a_log.append_as_leader(batch(1, "m2"), 0, time_ms=0)
    a_log.update_high_watermark(2)
    a_log.checkpoint_high_watermark()
    a_log.flush()
    b_log.flush()
    a_log, b_log = a_log.crash(), b_log.crash()
    assert (a_log.log_end_offset, a_log.high_watermark, b_log.log_end_offset) == (2, 2, 1)
    # B restarts first and is elected in epoch 1; it writes m3 where A has m2.
    b = make(2, b_log)
    b.apply_metadata(st(2, 1, 1, (1, 2), (2,)), 0)
    b.produce(1, batch(1, "m3"), 1, 30_000, 1)
    assert b_log.high_watermark == 2  # ISR {B}, min ISR 1
    # A restarts as a follower; its HW covers m2, yet it must drop it.
    a = make(1, a_log)
    a.apply_metadata(st(2, 1, 2, (1, 2), (2,)), 2)
    resp = exchange(a, {2: b}, 3)
    assert isinstance(resp, FetchResponse) and resp.diverging_epoch == EpochEndOffset(0, 1)
    assert a_log.log_end_offset == 1
    exchange(a, {2: b}, 4)
    assert log_bytes(a_log) == log_bytes(b_log)


# --- 6.8 KIP-279 ----------------------------------------------------------------------


def test_kip279_fast_leader_changes_b_truncates_m3() -> None:
    logs = {i: MemoryLog(name) for i, name in ((1, "A"), (2, "B"), (3, "C"))}
    # Epoch 1: A leads; m1 (offset 0) reaches everyone, m2 (offset 1) reaches A and C.
    fill(logs[1], 1, 1, "m1")
    fill(logs[1], 1, 1, "m2")
    copy_prefix(logs[1], logs[2], 1)
    copy_prefix(logs[1], logs[3], 2)
    assert all(epochs(log) == [(1, 0)] for log in logs.values())
    # A fails; B is elected in epoch 2 and accepts m3 at offset 1 (acks=1).
    b = make(2, logs[2])
    b.apply_metadata(st(2, 2, 2, (1, 2, 3), (2, 3)), 0)
    done = b.produce(1, batch(1, "m3"), 1, 30_000, 1)
    assert done == [ProduceCompleted(1, NONE, 1, 1, -1, 0)]
    assert epochs(logs[2]) == [(1, 0), (2, 1)]
    # B fails; C, which never heard of epoch 2, is elected in epoch 3.
    c = make(3, logs[3])
    c.apply_metadata(st(3, 3, 3, (1, 2, 3), (3,)), 2)
    c.produce(2, batch(2, "m4"), 1, 30_000, 3)
    assert epochs(logs[3]) == [(1, 0), (3, 2)]
    # KIP-279: C answers for epoch 2 with (epoch 1, end 2), not plain KIP-101's 2.
    assert logs[3].epoch_cache.end_offset_for(2, logs[3].log_end_offset) == (1, 2)
    # B returns as C's follower.
    b = make(2, logs[2])
    b.apply_metadata(st(3, 3, 4, (1, 2, 3), (3, 2)), 4)
    resp = exchange(b, {3: c}, 5)
    assert isinstance(resp, FetchResponse) and resp.diverging_epoch == EpochEndOffset(1, 2)
    assert logs[2].log_end_offset == 1  # min(2, 1, 2): m3 is dropped
    assert epochs(logs[2]) == [(1, 0)]
    for t in range(6, 9):
        exchange(b, {3: c}, t)
    assert log_bytes(logs[2]) == log_bytes(logs[3])


def test_kip279_walks_back_through_an_epoch_the_follower_never_had() -> None:
    """6.4: an answered epoch the follower never had -> truncate to the end of its largest
    epoch below it and ask again (OffsetsForLeaderEpoch round trips, Truncating state)."""
    origin = MemoryLog("origin")
    fill(origin, 0, 5, "a", per_batch=1)
    leader_log, follower_log = MemoryLog("L"), MemoryLog("F")
    copy_prefix(origin, leader_log, 3)
    copy_prefix(origin, follower_log, 5)
    fill(leader_log, 1, 5, "b")  # epoch 1: 3..7
    fill(follower_log, 2, 4, "c")  # epoch 2: 5..8
    leader = make(1, leader_log)
    leader.apply_metadata(st(1, 3, 3, (1, 2), (1,)), 0)
    assert epochs(leader_log) == [(0, 0), (1, 3), (3, 8)]
    follower = make(2, follower_log)
    follower.apply_metadata(st(1, 3, 3, (1, 2), (1,)), 0)
    # Drive the explicit Truncating path (taken when a fetch cannot be validated).
    follower.fetcher.move(FetchEvent.EPOCH_UNCERTAIN)
    out = follower.next_request(1)
    assert out is not None and isinstance(out.request, OffsetsForLeaderEpochRequest)
    assert out.request.leader_epoch == 2  # the latest cached epoch
    answer = leader.handle_offsets_for_leader_epoch(out.request)
    assert (answer.leader_epoch, answer.end_offset) == (1, 8)
    follower.handle_response(answer, 1)
    # The follower never had epoch 1: it cuts to the end of epoch 0 (5) and asks again.
    assert follower_log.log_end_offset == 5 and follower.fetcher.state is FetchState.TRUNCATING
    out = follower.next_request(2)
    assert out is not None and isinstance(out.request, OffsetsForLeaderEpochRequest)
    assert out.request.leader_epoch == 0
    answer = leader.handle_offsets_for_leader_epoch(out.request)
    assert (answer.leader_epoch, answer.end_offset) == (0, 3)
    follower.handle_response(answer, 2)
    assert follower_log.log_end_offset == 3 and follower.fetcher.state is FetchState.FETCHING
    for t in range(3, 6):
        exchange(follower, {1: leader}, t)
    assert log_bytes(follower_log) == log_bytes(leader_log)


def test_epoch_answer_undefined_falls_back_to_the_high_watermark() -> None:
    """The documented legacy case: LO == -1 truncates to the follower's own HW."""
    log = MemoryLog("F")
    fill(log, 0, 10, "a", per_batch=2)
    log.update_high_watermark(4)
    follower = make(2, log)
    follower.apply_metadata(st(1, 1, 1, (1, 2), (1, 2)), 0)
    follower.fetcher.move(FetchEvent.EPOCH_UNCERTAIN)
    out = follower.next_request(1)
    assert out is not None and isinstance(out.request, OffsetsForLeaderEpochRequest)
    follower.handle_response(
        OffsetsForLeaderEpochResponse(NONE, -1, -1, out.request.correlation_id), 1
    )
    assert log.log_end_offset == 4


# --- 6.6 OFFSET_OUT_OF_RANGE ---------------------------------------------------------


def test_out_of_range_follower_behind_leader_log_start() -> None:
    leader_log = MemoryLog("L")
    leader = make(1, leader_log)
    meta = st(1, 0, 0, (1, 2), (1,))
    leader.apply_metadata(meta, 0)
    for i in range(10):
        leader.produce(i, batch(10, f"x{i}"), 1, 30_000, 0)
    assert leader_log.high_watermark == 100
    leader_log.maybe_increment_log_start_offset(50)
    follower_log = MemoryLog("F")
    follower = make(2, follower_log)
    follower.apply_metadata(meta, 0)
    resp = exchange(follower, {1: leader}, 1)  # no epochs: legacy HW truncation, then fetch
    assert isinstance(resp, FetchResponse) and resp.error == OFFSET_OUT_OF_RANGE
    assert follower.fetcher.state is FetchState.LEADER_LEO
    resp = exchange(follower, {1: leader}, 2)  # leader LEO 100 >= ours
    assert follower.fetcher.state is FetchState.LEADER_START
    exchange(follower, {1: leader}, 3)  # leader start 50 > our LEO 0
    assert (follower_log.log_start_offset, follower_log.log_end_offset) == (50, 50)
    for t in range(4, 10):
        exchange(follower, {1: leader}, t)
    assert follower_log.log_end_offset == 100
    assert log_bytes(follower_log) == leader_log.read(50, 1 << 20).records


def test_out_of_range_follower_ahead_of_leader_truncates_to_leader_leo() -> None:
    leader_log = MemoryLog("L")
    leader = make(1, leader_log)
    meta = st(1, 0, 0, (1, 2), (1,))
    leader.apply_metadata(meta, 0)
    leader.produce(1, batch(5, "a"), 1, 30_000, 0)
    # A follower with 10 epoch-less records (a legacy log), all below its HW.
    follower_log = MemoryLog("F")
    legacy = build_batch([NewRecord(b"z", None, T0)] * 10)
    follower_log.append_as_follower(legacy)
    follower_log.update_high_watermark(10)
    assert epochs(follower_log) == []
    follower = make(2, follower_log)
    follower.apply_metadata(meta, 0)
    resp = exchange(follower, {1: leader}, 1)  # fetch 10 > leader LEO 5
    assert isinstance(resp, FetchResponse) and resp.error == OFFSET_OUT_OF_RANGE
    exchange(follower, {1: leader}, 2)  # ListOffsets LATEST for a replica: LEO 5 < 10
    assert follower_log.log_end_offset == 0  # the whole legacy batch 0..9 goes
    exchange(follower, {1: leader}, 3)
    assert log_bytes(follower_log) == log_bytes(leader_log)


# --- 7.4 high watermark ----------------------------------------------------------------


def three(min_isr: int = 1, **kw: object) -> tuple[dict[int, PartitionReplica], PartitionState]:
    nodes = {i: make(i, min_insync_replicas=min_isr, **kw) for i in (1, 2, 3)}
    meta = st(1, 0, 0, (1, 2, 3), (1, 2, 3))
    for r in nodes.values():
        r.apply_metadata(meta, 0)
    return nodes, meta


def fetch(nodes: dict[int, PartitionReplica], follower: int, offset: int, now: int, **kw: object):
    req = FetchRequest(follower, offset, nodes[1].leader_epoch, **kw)  # type: ignore[arg-type]
    return nodes[1].handle_fetch(req, now)


def test_high_watermark_is_min_leo_over_isr() -> None:
    nodes, _ = three()
    leader = nodes[1]
    for i in range(3):
        leader.produce(i, batch(10, f"b{i}"), 1, 30_000, 0)
    assert leader.high_watermark == 0  # followers' LEOs are unknown
    fetch(nodes, 2, 30, 1)
    assert leader.high_watermark == 0
    _, actions = fetch(nodes, 3, 10, 1)
    assert leader.high_watermark == 10 and HighWatermarkUpdated(10) in actions
    fetch(nodes, 3, 20, 2)
    assert leader.high_watermark == 20
    fetch(nodes, 3, 10, 3)  # a follower going back never moves the leader HW back
    assert leader.high_watermark == 20
    fetch(nodes, 3, 30, 4)
    assert leader.high_watermark == 30 == leader.log.log_end_offset


def test_a_read_from_purgatory_reads_but_leaves_the_follower_alone() -> None:
    """A waiting fetch's later read (Kafka's readFromPurgatory) returns the records
    appended since, and neither the follower's position nor the HW moves with it: the
    fetch's arrival updated them."""
    nodes, _ = three()
    leader = nodes[1]
    fetch(nodes, 2, 0, 1)
    fetch(nodes, 3, 0, 1)  # both caught up at 0, then the fetches wait
    leader.produce(1, batch(10), -1, 30_000, 2)
    resp, actions = fetch(nodes, 2, 0, 3, from_purgatory=True)
    assert resp.records and len(list(iter_batches(resp.records))) == 1
    assert actions == [] and leader.followers[2].last_fetch_time_ms == 1
    fetch(nodes, 2, 10, 4)
    fetch(nodes, 3, 10, 4, from_purgatory=True)  # does not count as 3 reaching 10
    assert leader.high_watermark == 0
    fetch(nodes, 3, 10, 5)
    assert leader.high_watermark == 10


def test_caught_up_follower_outside_isr_holds_the_high_watermark() -> None:
    nodes, meta = three()
    leader = nodes[1]
    leader.apply_metadata(replace(meta, isr=(1, 2), partition_epoch=1), 0)
    leader.produce(1, batch(10), 1, 30_000, 0)
    fetch(nodes, 3, 10, 1)  # 3 caught up: an expansion is proposed, 3 counts for the HW
    fetch(nodes, 2, 10, 1)
    assert leader.high_watermark == 10
    leader.produce(2, batch(10), 1, 30_000, 2)
    fetch(nodes, 2, 20, 3)
    assert leader.high_watermark == 10  # 3 (in the maximal ISR now) is at 10


def test_high_watermark_stalls_under_min_isr() -> None:
    nodes, meta = three(min_isr=2)
    leader = nodes[1]
    leader.apply_metadata(replace(meta, isr=(1,), partition_epoch=1), 0)
    done = leader.produce(1, batch(5), -1, 30_000, 0)
    assert done == [ProduceCompleted(1, NOT_ENOUGH_REPLICAS, -1)]
    assert leader.log.log_end_offset == 0  # refused before appending
    leader.produce(2, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 1)
    fetch(nodes, 3, 5, 1)
    assert leader.log.log_end_offset == 5 and leader.high_watermark == 0
    # The committed ISR grows back to 2: the HW moves.
    leader.apply_metadata(replace(meta, isr=(1, 2), partition_epoch=2), 2)
    assert leader.high_watermark == 5


def test_min_isr_uses_replication_factor_when_smaller() -> None:
    r = make(1, min_insync_replicas=3)
    r.apply_metadata(st(1, 0, 0, (1,), (1,)), 0)
    done = r.produce(1, batch(1), -1, 30_000, 0)
    assert ProduceCompleted(1, NONE, -1, 0, -1, 0) in done


# --- 7.5 acks --------------------------------------------------------------------------


def test_acks_all_completes_when_hw_passes_the_append() -> None:
    nodes, _ = three(min_isr=2)
    leader = nodes[1]
    assert leader.produce(7, batch(3), -1, 1_000, 0) == []
    assert leader.delayed_produce_count == 1
    _, actions = fetch(nodes, 2, 3, 1)
    assert not any(isinstance(a, ProduceCompleted) for a in actions)
    _, actions = fetch(nodes, 3, 3, 2)
    assert ProduceCompleted(7, NONE, -1, 0, -1, 0) in actions
    assert leader.delayed_produce_count == 0


def test_acks_0_and_1_answer_at_once_and_invalid_acks() -> None:
    nodes, _ = three()
    assert nodes[1].produce(1, batch(), 0, 1_000, 0) == [ProduceCompleted(1, NONE, 0, 0, -1, 0)]
    assert nodes[1].produce(2, batch(), 1, 1_000, 0) == [ProduceCompleted(2, NONE, 1, 1, -1, 0)]
    assert nodes[1].produce(3, batch(), 2, 1_000, 0)[0].error == "INVALID_REQUIRED_ACKS"
    assert nodes[2].produce(4, batch(), 1, 1_000, 0)[0].error == NOT_LEADER_OR_FOLLOWER


def test_acks_all_times_out() -> None:
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(7, batch(), -1, 1_000, 0)
    assert leader.tick(999) == []
    assert ProduceCompleted(7, REQUEST_TIMED_OUT, -1) in leader.tick(1_000)
    assert leader.delayed_produce_count == 0


def test_acks_all_fails_on_leadership_loss() -> None:
    nodes, meta = three()
    leader = nodes[1]
    leader.produce(7, batch(), -1, 1_000, 0)
    actions = leader.apply_metadata(replace(meta, leader=2, leader_epoch=1, partition_epoch=1), 1)
    assert actions == [ProduceCompleted(7, NOT_LEADER_OR_FOLLOWER, -1)]


def test_delayed_produce_queue_is_bounded() -> None:
    nodes, _ = three(max_delayed_produces=2)
    leader = nodes[1]
    leader.produce(1, batch(), -1, 1_000, 0)
    leader.produce(2, batch(), -1, 1_000, 0)
    # Refused before writing, so with an error that says so (not REQUEST_TIMED_OUT, which
    # a client must take as "possibly written").
    assert leader.produce(3, batch(), -1, 1_000, 0) == [
        ProduceCompleted(3, NOT_ENOUGH_REPLICAS, -1)
    ]
    assert leader.log.log_end_offset == 2


def test_not_enough_replicas_after_append_with_pre_3_7_high_watermark() -> None:
    """With the 3.7 stall the HW cannot pass an append while the ISR is under min ISR, so
    NOT_ENOUGH_REPLICAS_AFTER_APPEND needs the older rule (stall_hw_under_min_isr=False)."""
    nodes, _ = three(min_isr=2, stall_hw_under_min_isr=False)
    leader = nodes[1]
    leader.produce(7, batch(), -1, 30_000, 0)
    fetch(nodes, 2, 0, 0)
    fetch(nodes, 3, 0, 0)
    actions = leader.tick(LAG + 1)  # both followers lag: shrink to {1}
    (alter,) = [a for a in actions if isinstance(a, SendAlterPartition)]
    actions = leader.on_alter_partition_response(
        AlterPartitionResponse(NONE, alter.request_id, 0, 1, (1,)), LAG + 2
    )
    assert ProduceCompleted(7, NOT_ENOUGH_REPLICAS_AFTER_APPEND, -1) in actions


def test_acks_all_duplicate_retry_answers_original_offsets() -> None:
    nodes, _ = three()
    leader = nodes[1]
    data = batch(2, pid=9, seq=0)
    leader.produce(1, data, -1, 30_000, 0)
    assert leader.produce(2, data, -1, 30_000, 1) == []  # a retry: parked, not re-appended
    assert leader.log.log_end_offset == 2
    fetch(nodes, 2, 2, 2)
    _, actions = fetch(nodes, 3, 2, 2)
    assert ProduceCompleted(1, NONE, -1, 0, -1, 0) in actions
    assert ProduceCompleted(2, NONE, -1, 0, -1, 0) in actions


# --- 7.3 ISR ---------------------------------------------------------------------------


def test_isr_shrinks_after_lag_with_pending_maximal_isr() -> None:
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(1, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 100)
    fetch(nodes, 3, 0, 100)  # 3 stops at 0
    assert leader.high_watermark == 0
    # The check runs every lag/2; at LAG, 3 caught up at 0 is exactly LAG ago: still in.
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(LAG))
    fetch(nodes, 2, 5, LAG + 50)
    t = LAG + LAG // 2
    actions = leader.tick(t)
    (alter,) = [a for a in actions if isinstance(a, SendAlterPartition)]
    assert (alter.new_isr, alter.leader_epoch, alter.partition_epoch) == ((1, 2), 0, 0)
    # Pending shrink: the maximal ISR is still the old one, so the HW waits for 3.
    assert leader.maximal_isr == {1, 2, 3} and leader.high_watermark == 0
    # Unanswered: sent again after alter_partition_retry_ms.
    assert alter in leader.tick(t + 500)
    leader.on_alter_partition_response(
        AlterPartitionResponse(NONE, alter.request_id, 0, 1, (1, 2)), t + 600
    )
    assert leader.isr == {1, 2} and leader.partition_epoch == 1
    assert leader.high_watermark == 5


def test_isr_expands_after_catch_up_with_pending_maximal_isr() -> None:
    nodes = {i: make(i) for i in (1, 2, 3)}
    meta = st(1, 0, 0, (1, 2, 3), (1, 2))
    for r in nodes.values():
        r.apply_metadata(meta, 0)
    leader = nodes[1]
    leader.produce(1, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 1)
    assert leader.high_watermark == 5
    leader.produce(2, batch(5), 1, 30_000, 2)
    _, actions = fetch(nodes, 3, 4, 3)  # below the HW: not yet
    assert not any(isinstance(a, SendAlterPartition) for a in actions)
    _, actions = fetch(nodes, 3, 5, 4)  # LEO >= HW and >= epoch start 0
    (alter,) = [a for a in actions if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1, 2, 3) and alter.broker_epochs == (1, -1, -1)
    assert leader.maximal_isr == {1, 2, 3} and leader.isr == {1, 2}
    fetch(nodes, 2, 10, 5)
    assert leader.high_watermark == 5  # 3 (being added) holds it
    # Rejected as stale: stays pending, is not re-sent, until metadata arrives.
    leader.on_alter_partition_response(
        AlterPartitionResponse(INVALID_UPDATE_VERSION, alter.request_id), 6
    )
    assert leader.pending_isr_change == alter
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(2_000))
    leader.apply_metadata(replace(meta, isr=(1, 2, 3), partition_epoch=2), 2_001)
    assert leader.pending_isr_change is None and leader.isr == {1, 2, 3}


@pytest.mark.parametrize("error", ["NOT_CONTROLLER", "REQUEST_TIMED_OUT"])
def test_an_isr_change_failed_for_another_reason_is_sent_again(error: str) -> None:
    nodes = {i: make(i) for i in (1, 2, 3)}
    for r in nodes.values():
        r.apply_metadata(st(1, 0, 0, (1, 2, 3), (1, 2)), 0)
    leader = nodes[1]
    leader.produce(1, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 1)
    _, actions = fetch(nodes, 3, 5, 2)
    (alter,) = [a for a in actions if isinstance(a, SendAlterPartition)]
    # e.g. the controller lost its leadership while committing the change
    leader.on_alter_partition_response(AlterPartitionResponse(error, alter.request_id), 3)
    assert leader.pending_isr_change == alter
    assert alter in leader.tick(3 + cfg().alter_partition_retry_ms)
    leader.on_alter_partition_response(
        AlterPartitionResponse(NONE, alter.request_id, 0, 1, (1, 2, 3)), 6_000
    )
    assert leader.isr == {1, 2, 3} and leader.pending_isr_change is None


def test_expand_requires_reaching_the_leader_epoch_start() -> None:
    leader_log = MemoryLog("L")
    fill(leader_log, 0, 10, "a", per_batch=5)
    leader = make(1, leader_log, min_insync_replicas=2)  # the HW stays at 0
    leader.apply_metadata(st(1, 1, 1, (1, 2), (1,)), 0)
    assert leader.epoch_start_offset == 10 and leader.high_watermark == 0
    _, actions = leader.handle_fetch(FetchRequest(2, 5, 1), 1)  # >= HW 0 but < 10
    assert not any(isinstance(a, SendAlterPartition) for a in actions)
    _, actions = leader.handle_fetch(FetchRequest(2, 10, 1), 2)
    assert any(isinstance(a, SendAlterPartition) for a in actions)


def test_ineligible_replica_is_not_added_and_rejection_reverts() -> None:
    log = MemoryLog("L")
    leader = PartitionReplica(
        1, log, cfg(), broker_epoch=1, is_replica_eligible=lambda r, e: e == 7
    )
    leader.apply_metadata(st(1, 0, 0, (1, 2), (1,)), 0)
    _, actions = leader.handle_fetch(FetchRequest(2, 0, 0, replica_epoch=6), 1)
    assert not any(isinstance(a, SendAlterPartition) for a in actions)
    _, actions = leader.handle_fetch(FetchRequest(2, 0, 0, replica_epoch=7), 2)
    (alter,) = [a for a in actions if isinstance(a, SendAlterPartition)]
    assert alter.broker_epochs == (1, 7)
    leader.on_alter_partition_response(
        AlterPartitionResponse("INELIGIBLE_REPLICA", alter.request_id), 3
    )
    assert leader.pending_isr_change is None and leader.maximal_isr == {1}


def test_a_caught_up_follower_joins_once_eligible_without_a_new_fetch() -> None:
    """A follower restarted and caught up while its broker was still fenced: in a fetch
    session its idle partition sends no new fetch, so the leader's timer adds it once
    the broker is eligible (before, the ISR stayed short until new data came)."""
    eligible = {2: False}
    leader = PartitionReplica(
        1, MemoryLog("L"), cfg(), broker_epoch=1, is_replica_eligible=lambda r, e: eligible[r]
    )
    leader.apply_metadata(st(1, 0, 0, (1, 2), (1,)), 0)
    _, actions = leader.handle_fetch(FetchRequest(2, 0, 0, replica_epoch=5), 1)
    assert not any(isinstance(a, SendAlterPartition) for a in actions)
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(2))
    eligible[2] = True  # the controller unfenced it; no fetch arrives
    (alter,) = [a for a in leader.tick(3) if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1, 2)


# --- metadata, epochs, fencing -----------------------------------------------------------


def test_stale_partition_epoch_is_ignored() -> None:
    nodes, meta = three()
    r = nodes[2]
    assert r.apply_metadata(replace(meta, leader=3, leader_epoch=1, partition_epoch=3), 0) == []
    assert (r.leader_id, r.leader_epoch, r.partition_epoch) == (3, 1, 3)
    r.apply_metadata(replace(meta, leader=1, leader_epoch=1, partition_epoch=2), 1)
    assert (r.leader_id, r.partition_epoch) == (3, 3)
    with pytest.raises(ReplicaInvariantError):
        r.apply_metadata(replace(meta, leader=1, leader_epoch=0, partition_epoch=4), 2)


def test_new_leader_assigns_epoch_and_resets_follower_state() -> None:
    nodes, meta = three()
    leader = nodes[1]
    leader.produce(1, batch(4), 1, 30_000, 0)
    fetch(nodes, 2, 4, 10)
    fetch(nodes, 3, 2, 10)
    # Re-elected with a new epoch (it stays leader): LEOs are kept, lastCaughtUp reset.
    leader.apply_metadata(replace(meta, isr=(1, 2), leader_epoch=1, partition_epoch=1), 500)
    assert epochs(leader.log) == [(0, 0), (1, 4)]  # type: ignore[arg-type]
    assert leader.epoch_start_offset == 4
    assert leader.followers[2].leo == 4 and leader.followers[2].last_caught_up_time_ms == 500
    assert leader.followers[3].last_caught_up_time_ms == NEVER
    # A follower that becomes leader forgets the followers' LEOs.
    new = nodes[2]
    new.apply_metadata(replace(meta, leader=2, leader_epoch=2, partition_epoch=2), 600)
    assert all(f.leo == -1 for f in new.followers.values())
    assert new.followers[1].last_caught_up_time_ms == 600


def test_becoming_follower_with_new_epoch_restarts_fetching() -> None:
    nodes, meta = three()
    f = nodes[2]
    exchange(f, nodes, 1)
    assert f.is_synced_follower()
    f.apply_metadata(replace(meta, isr=(1, 2), partition_epoch=1), 2)  # ISR only: no restart
    assert f.is_synced_follower()
    f.apply_metadata(replace(meta, leader_epoch=1, partition_epoch=2), 3)
    assert not f.is_synced_follower() and f.fetcher.state is FetchState.TRUNCATING
    out = f.next_request(4)  # empty log, no epochs: HW truncation then a plain fetch
    assert out is not None and isinstance(out.request, FetchRequest)
    assert out.request.current_leader_epoch == 1


def test_fetch_fencing_errors() -> None:
    nodes, meta = three()
    leader = nodes[1]
    leader.apply_metadata(replace(meta, leader_epoch=3, partition_epoch=1), 0)

    def err(req: FetchRequest) -> str:
        return leader.handle_fetch(req, 1)[0].error

    assert err(FetchRequest(2, 0, 2)) == FENCED_LEADER_EPOCH
    assert err(FetchRequest(2, 0, 4)) == UNKNOWN_LEADER_EPOCH
    assert err(FetchRequest(9, 0, 3)) == UNKNOWN_LEADER_EPOCH  # unknown replica, epoch sent
    assert err(FetchRequest(9, 0, -1)) == NOT_LEADER_OR_FOLLOWER  # unknown replica, no epoch
    assert err(FetchRequest(2, 0, 3, replica_epoch=5)) == NONE
    assert err(FetchRequest(2, 0, 3, replica_epoch=4)) == NOT_LEADER_OR_FOLLOWER  # stale broker
    assert err(FetchRequest(2, 7, 3)) == OFFSET_OUT_OF_RANGE
    follower = nodes[2]
    assert follower.handle_fetch(FetchRequest(3, 0, 0), 1)[0].error == NOT_LEADER_OR_FOLLOWER


def test_follower_backs_off_on_unknown_epoch_and_stops_when_fenced() -> None:
    nodes, _ = three()
    f = nodes[2]
    out = f.next_request(0)
    assert out is not None
    f.handle_response(FetchResponse(UNKNOWN_LEADER_EPOCH, out.request.correlation_id), 0)
    assert f.next_request(50) is None  # backoff 100 ms
    out = f.next_request(100)
    assert out is not None
    f.handle_response(FetchResponse(FENCED_LEADER_EPOCH, out.request.correlation_id), 100)
    assert f.fetcher.state is FetchState.FENCED and f.next_request(10_000) is None
    # An unanswered request is given up after the request timeout.
    g = nodes[3]
    assert g.next_request(0) is not None and g.next_request(999) is None
    assert g.next_request(1_000) is None and g.next_request(1_100) is not None


def test_stale_or_duplicated_responses_are_ignored() -> None:
    nodes, _ = three()
    nodes[1].produce(1, batch(3), 1, 30_000, 0)
    f = nodes[2]
    out = f.next_request(0)
    assert out is not None and isinstance(out.request, FetchRequest)
    resp, _ = nodes[1].handle_fetch(out.request, 0)
    f.handle_response(resp, 0)
    f.handle_response(resp, 1)  # duplicate: ignored, no double append
    assert f.log.log_end_offset == 3


# --- follower HW / log start, consumers, ListOffsets -----------------------------------


def test_follower_high_watermark_and_log_start_from_leader() -> None:
    nodes, _ = three()
    leader, f = nodes[1], nodes[2]
    for i in range(4):
        leader.produce(i, batch(5), 1, 30_000, 0)
    fetch(nodes, 3, 20, 1)
    exchange(f, nodes, 2)  # gets 0..19; response HW (pre-read) 0
    assert f.log.high_watermark == 0
    exchange(f, nodes, 3)  # the leader's HW moves to 20 after reading (pre-read 0 sent)
    assert f.log.high_watermark == 0
    exchange(f, nodes, 4)
    assert f.log.high_watermark == 20
    leader.log.maybe_increment_log_start_offset(10)
    leader.produce(9, batch(5), 1, 30_000, 4)
    exchange(f, nodes, 5)
    assert f.log.log_start_offset == 10


def test_consumers_read_below_the_high_watermark_only() -> None:
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(1, batch(5, "a"), 1, 30_000, 0)
    leader.produce(2, batch(5, "b"), 1, 30_000, 0)
    fetch(nodes, 2, 5, 1)
    fetch(nodes, 3, 5, 1)
    assert leader.consumer_read_bound() == 5
    r = leader.read_for_consumer(0, 1 << 20)
    assert r.error == NONE and r.high_watermark == 5
    assert [h.base_offset for _, h in iter_batches(r.records)] == [0]
    assert leader.read_for_consumer(5, 1 << 20).records == b""
    assert leader.read_for_consumer(11, 1 << 20).error == OFFSET_OUT_OF_RANGE
    assert nodes[2].read_for_consumer(0, 100).error == NOT_LEADER_OR_FOLLOWER


def test_list_offsets_latest_is_hw_and_unavailable_for_a_fresh_leader() -> None:
    log = MemoryLog("L")
    fill(log, 0, 10, "a", per_batch=5)
    log.update_high_watermark(5)
    leader = make(1, log)
    leader.apply_metadata(st(1, 1, 1, (1, 2), (1, 2)), 0)
    latest = leader.handle_list_offsets(ListOffsetsRequest(LATEST_TIMESTAMP))
    assert latest.error == OFFSET_NOT_AVAILABLE  # HW 5 < epoch start 10
    replica = leader.handle_list_offsets(ListOffsetsRequest(LATEST_TIMESTAMP, replica_id=2))
    assert (replica.error, replica.offset) == (NONE, 10)
    earliest = leader.handle_list_offsets(ListOffsetsRequest(EARLIEST_TIMESTAMP))
    assert (earliest.error, earliest.offset, earliest.leader_epoch) == (NONE, 0, 0)
    leader.handle_fetch(FetchRequest(2, 10, 1), 1)
    latest = leader.handle_list_offsets(
        ListOffsetsRequest(LATEST_TIMESTAMP, current_leader_epoch=1)
    )
    assert (latest.error, latest.offset, latest.leader_epoch) == (NONE, 10, 1)
    by_time = leader.handle_list_offsets(ListOffsetsRequest(T0))
    assert (by_time.offset, by_time.timestamp) == (0, T0)
    stale = leader.handle_list_offsets(ListOffsetsRequest(LATEST_TIMESTAMP, current_leader_epoch=0))
    assert stale.error == FENCED_LEADER_EPOCH


# --- the real storage Log satisfies ReplicaLog ----------------------------------------


def test_replicates_between_real_storage_logs(tmp_path: Path) -> None:
    config = LogConfig.defaults()
    logs = {i: Log.open(tmp_path / f"n{i}" / "t-0", config, time_ms=T0) for i in (1, 2)}
    nodes = {i: PartitionReplica(i, logs[i], cfg(min_insync_replicas=2)) for i in (1, 2)}
    meta = st(1, 0, 0, (1, 2), (1, 2))
    for r in nodes.values():
        r.apply_metadata(meta, T0)
    leader = nodes[1]
    assert leader.produce(1, batch(3, pid=4, seq=0), -1, 30_000, T0) == []
    exchange(nodes[2], nodes, T0 + 1)
    out = nodes[2].next_request(T0 + 2)
    assert out is not None and isinstance(out.request, FetchRequest)
    resp, actions = leader.handle_fetch(out.request, T0 + 2)
    assert ProduceCompleted(1, NONE, -1, 0, -1, 0) in actions
    nodes[2].handle_response(resp, T0 + 2)
    exchange(nodes[2], nodes, T0 + 3)  # the HW reaches the follower one fetch later
    assert logs[2].high_watermark == 3
    assert logs[1].read(0, 1 << 20).records == logs[2].read(0, 1 << 20).records
    assert logs[2].epoch_cache.entries() == logs[1].epoch_cache.entries()
    for log in logs.values():
        log.close()


def test_an_idle_partition_drops_a_follower_that_stopped_fetching() -> None:
    """Issue 39: no records arrive, follower 3 (at the log end) stops fetching at 100;
    it is out of sync a lag later, though still at the log end (Kafka kept it)."""
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(1, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 100)
    fetch(nodes, 3, 5, 100)
    fetch(nodes, 2, 5, LAG)  # 2 goes on fetching; 3 is silent
    assert leader.isr_deadline_ms(LAG) == 100 + LAG + 1  # 3's: due when it runs out
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(100 + LAG))
    (alter,) = [a for a in leader.tick(101 + LAG) if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1, 2)


def in_sessions(session: dict[int, int]) -> dict[int, PartitionReplica]:
    """Three replicas, 1 leading, whose followers fetch in sessions: `session` holds
    each follower node's last fetch (the test moves it)."""
    nodes = {
        i: PartitionReplica(
            i, MemoryLog(f"n{i}"), cfg(), broker_epoch=1, session_fetch_ms=session.__getitem__
        )
        for i in (1, 2, 3)
    }
    for r in nodes.values():
        r.apply_metadata(st(1, 0, 0, (1, 2, 3), (1, 2, 3)), 0)
    return nodes


def test_in_a_fetch_session_an_idle_partition_is_caught_up_by_its_nodes_fetches() -> None:
    """With fetch sessions the followers' fetches leave the idle partition out: each
    fetch of the node counts as one at its position; a behind follower's deadline is
    the partition's, an at-end follower's its node's (none in isr_deadline_ms)."""
    session = {2: 100, 3: 100}
    nodes = in_sessions(session)
    leader = nodes[1]
    leader.produce(1, batch(5), 1, 30_000, 0)
    fetch(nodes, 2, 5, 100)
    fetch(nodes, 3, 5, 100)
    assert leader.isr_deadline_ms(200) is None  # both at the end: their nodes' business
    session[2] = session[3] = 5 * LAG  # both nodes go on fetching in their sessions
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(5 * LAG))
    # Node 3 falls silent at 5*LAG: out of sync a lag later, not before.
    session[2] = 6 * LAG
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(6 * LAG))
    assert leader.isr_deadline_ms(6 * LAG + 1) == 6 * LAG + 1  # out of sync: due now
    (alter,) = [a for a in leader.tick(6 * LAG + 1) if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1, 2)


def test_a_produce_after_a_long_idle_spell_does_not_shrink_the_isr() -> None:
    """The followers at the end were caught up as of their nodes' last session fetch
    when the log end moves: the first append after an hour idle shrinks nothing."""
    session = {2: 0, 3: 0}
    nodes = in_sessions(session)
    leader = nodes[1]
    fetch(nodes, 2, 0, 10)
    fetch(nodes, 3, 0, 10)
    hour = 3_600_000
    session[2] = session[3] = hour
    leader.produce(1, batch(5), -1, 30_000, hour)
    assert leader.isr_deadline_ms(hour) == hour + LAG + 1
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(hour + 1))



def test_a_leader_that_stalled_does_not_blame_its_followers_for_the_stall() -> None:
    """A follower cannot fetch from a leader whose loop or disk is stuck: its lag counts
    from the end of the leader's own stall (`serving_since_ms`), so a stuck leader does
    not shrink its ISR to itself (then its fence would find no leader to elect)."""
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(1, batch(5), -1, 30_000, 0)
    fetch(nodes, 2, 5, 10)
    fetch(nodes, 3, 5, 10)
    stalled_at = [LAG]  # the shell saw the node stuck until LAG
    leader.serving_since_ms = lambda: stalled_at[0]
    assert leader.isr_deadline_ms(LAG) == 2 * LAG + 1
    assert not any(isinstance(a, SendAlterPartition) for a in leader.tick(LAG + 11))
    # Silent for a whole lag after the stall ended: out of sync after all.
    (alter,) = [a for a in leader.tick(2 * LAG + 1) if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1,)
    # Without the stall the same follower silence shrinks at once.
    nodes, _ = three()
    plain = nodes[1]
    plain.produce(1, batch(5), -1, 30_000, 0)
    fetch(nodes, 2, 5, 10)
    fetch(nodes, 3, 5, 10)
    (alter,) = [a for a in plain.tick(LAG + 11) if isinstance(a, SendAlterPartition)]
    assert alter.new_isr == (1,)

# --- deferred flush.messages (issue 40: no fsync on the loop) ---------------------------


def flushing_log(name: str) -> MemoryLog:
    log = MemoryLog(name, LogConfig.defaults().with_overrides({"flush.messages": "1"}))
    log.log.defer_message_flushes = True  # as the node's ReplicaManager sets it
    return log


def run_flush(log: MemoryLog) -> None:
    """What node/message_flusher.py does off the loop."""
    job = log.log.begin_demanded_flush()
    assert job is not None
    assert job.run()
    log.log.end_flush(job)


def answers(actions: list[object]) -> list[tuple[int, str]]:
    return [(a.request_id, a.error) for a in actions if isinstance(a, ProduceCompleted)]


def test_deferred_flush_messages_hold_a_leaders_answers_until_the_fsync() -> None:
    log = flushing_log("leader")
    leader = make(1, log)
    leader.apply_metadata(st(1, 0, 0, (1,), (1,)), 0)
    one = leader.produce(1, batch(), 1, 1_000, 1)
    assert FLUSH_LOG in one and answers(one) == []  # appended, not yet fsynced
    assert log.log_end_offset == 1 and log.durable_offset == 0 and log.awaits_flush
    # acks=-1: the HW passes the batch at once (ISR {1}), the fsync is still owed.
    all_ = leader.produce(2, batch(), -1, 1_000, 2)
    assert FLUSH_LOG in all_ and answers(all_) == []
    acks0 = leader.produce(3, batch(), 0, 1_000, 3)
    assert answers(acks0) == [(3, NONE)]  # nobody waits for an acks=0 answer
    run_flush(log)
    assert log.durable_offset == 3 and not log.awaits_flush
    assert sorted(answers(leader.on_flushed())) == [(1, NONE), (2, NONE)]
    assert leader.on_flushed() == []  # nothing held, nothing owed


def test_held_answers_fail_when_the_leadership_goes() -> None:
    log = flushing_log("leader")
    leader = make(1, log)
    leader.apply_metadata(st(1, 0, 0, (1, 2), (1, 2)), 0)
    assert answers(leader.produce(1, batch(), 1, 1_000, 1)) == []
    actions = leader.apply_metadata(st(2, 1, 1, (1, 2), (1, 2)), 5)
    # Appended, maybe not durable: "may be written" (docs/replication-rules.md 5.8).
    assert answers(actions) == [(1, NOT_LEADER_OR_FOLLOWER)]


def test_a_follower_fetches_again_only_once_its_deferred_flush_is_done() -> None:
    leader_log = MemoryLog("leader")
    fill(leader_log, 0, 5, "a")
    leader = make(1, leader_log)
    follower_log = flushing_log("follower")
    follower = make(2, follower_log)
    meta = st(1, 0, 0, (1, 2), (1, 2))
    leader.apply_metadata(meta, 0)
    follower.apply_metadata(meta, 0)
    nodes = {1: leader, 2: follower}
    out = follower.next_request(1)
    assert out is not None
    resp, _ = leader.handle_fetch(out.request, 1)  # type: ignore[arg-type]
    assert follower.handle_response(resp, 1) == [FLUSH_LOG]
    assert follower_log.log_end_offset == 5 and follower_log.awaits_flush
    # Its next fetch would tell the leader it holds offsets 0-4: not before the fsync.
    assert follower.next_request(2) is None
    run_flush(follower_log)
    assert follower.on_flushed() == []
    assert exchange(follower, nodes, 3) is not None
    assert leader.followers[2].leo == 5
