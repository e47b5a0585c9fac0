"""The cleaner's planning as plain functions: the cleanable range, the dirty ratio,
forcing by max.compaction.lag.ms, the dirtiest log first, segment groups, idle rolls."""

from __future__ import annotations

from seglog.storage.cleaner_plan import (
    LogView,
    SegmentView,
    cleanable_range,
    first_dirty_offset,
    first_uncleanable_offset,
    group_segments,
    idle_roll_due,
    select_filthiest,
)

NOW = 1_000_000


def seg(base: int, nxt: int, size: int = 100, ts: int = 0, first_ts: int = 0) -> SegmentView:
    return SegmentView(base, nxt, size, 8, 12, ts, first_ts)


def view(segments: list[SegmentView], **kw: object) -> LogView:
    args: dict[str, object] = {
        "segments": tuple(segments),
        "log_start_offset": segments[0].base_offset,
        "high_watermark": segments[-1].next_offset,
        "first_undecided_offset": None,
        "checkpoint": None,
        "compact": True,
        "min_cleanable_dirty_ratio": 0.5,
        "min_compaction_lag_ms": 0,
        "max_compaction_lag_ms": 2**63 - 1,
    }
    args.update(kw)
    return LogView(**args)  # type: ignore[arg-type]


SEGS = [seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 35)]  # the last is active


def test_the_active_segment_is_never_cleanable() -> None:
    assert first_uncleanable_offset(view(SEGS), NOW) == 30


def test_nothing_at_or_above_the_high_watermark_is_cleanable() -> None:
    assert first_uncleanable_offset(view(SEGS, high_watermark=20), NOW) == 20
    assert first_uncleanable_offset(view(SEGS, high_watermark=19), NOW) == 10


def test_an_open_transaction_bounds_the_range() -> None:
    assert first_uncleanable_offset(view(SEGS, first_undecided_offset=15), NOW) == 10


def test_min_compaction_lag_keeps_young_segments() -> None:
    segs = [
        seg(0, 10, ts=NOW - 5000),
        seg(10, 20, ts=NOW - 500),
        seg(20, 30, ts=NOW - 5000),
        seg(30, 35),
    ]
    assert first_uncleanable_offset(view(segs, min_compaction_lag_ms=1000), NOW) == 10
    assert first_uncleanable_offset(view(segs, min_compaction_lag_ms=100), NOW) == 30


def test_the_checkpoint_is_the_first_dirty_offset_unless_outside_the_log() -> None:
    assert first_dirty_offset(view(SEGS, checkpoint=20)) == 20
    assert first_dirty_offset(view(SEGS, checkpoint=99)) == 0
    assert first_dirty_offset(view(SEGS, checkpoint=5, log_start_offset=8)) == 8
    assert first_dirty_offset(view(SEGS)) == 0


def test_dirty_ratio_counts_segments_on_each_side_of_the_checkpoint() -> None:
    rng = cleanable_range(view(SEGS, checkpoint=20), NOW)
    assert (rng.first_dirty, rng.first_uncleanable) == (20, 30)
    assert (rng.clean_bytes, rng.dirty_bytes) == (200, 100)
    assert abs(rng.ratio - 1 / 3) < 1e-9
    everything = cleanable_range(view(SEGS), NOW)
    assert everything.ratio == 1.0 and everything.has_dirty


def test_max_compaction_lag_forces_a_clean_below_the_ratio() -> None:
    segs = [seg(0, 10, first_ts=NOW - 10_000), seg(10, 20, first_ts=NOW - 9_000), seg(20, 25)]
    v = view(segs, checkpoint=10, min_cleanable_dirty_ratio=0.9)
    assert select_filthiest([("a", v)], NOW) is None
    forced = view(segs, checkpoint=10, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=5000)
    chosen = select_filthiest([("a", forced)], NOW)
    assert chosen is not None and chosen[1].forced


def test_the_dirtiest_due_log_goes_first() -> None:
    half = view(SEGS, checkpoint=10)  # 200 dirty of 300
    all_dirty = view(SEGS)
    delete_only = view(SEGS, compact=False)
    chosen = select_filthiest([("half", half), ("all", all_dirty), ("del", delete_only)], NOW)
    assert chosen is not None and chosen[0] == "all"
    clean = view(SEGS, checkpoint=30)
    assert select_filthiest([("clean", clean), ("del", delete_only)], NOW) is None


def test_a_passed_delete_horizon_makes_a_clean_log_due() -> None:
    v = view(SEGS, checkpoint=30, horizon_due_ms=NOW)
    assert select_filthiest([("t", v)], NOW) is not None
    assert select_filthiest([("t", view(SEGS, checkpoint=30, horizon_due_ms=NOW + 1))], NOW) is None


def test_groups_fit_one_segment_by_size_index_and_offset_span() -> None:
    segs = [seg(0, 10, size=40), seg(10, 20, size=40), seg(20, 30, size=40), seg(30, 40, size=90)]
    assert [[s.base_offset for s in g] for g in group_segments(segs, 100, 1000)] == [
        [0, 10],
        [20],
        [30],
    ]
    by_index = group_segments(segs, 10_000, 24)  # 8 + 12 bytes of indexes each
    assert [[s.base_offset for s in g] for g in by_index] == [[0, 10], [20, 30]]
    wide = [seg(0, 10), seg(2**31, 2**31 + 5)]
    assert len(group_segments(wide, 10_000, 10_000)) == 2
    huge = [seg(0, 10, size=500)]
    assert group_segments(huge, 100, 100) == [huge]  # a group always holds one segment


def test_a_quiet_active_segment_rolls_after_segment_ms() -> None:
    kw = dict(
        active_size=10,
        created_ms=0,
        max_segment_ms=1000,
        roll_jitter_ms=0,
        high_watermark=5,
        log_end_offset=5,
    )
    assert idle_roll_due(first_timestamp=NOW - 1001, now_ms=NOW, **kw)
    assert not idle_roll_due(first_timestamp=NOW - 1000, now_ms=NOW, **kw)
    assert not idle_roll_due(first_timestamp=-1, now_ms=500, **kw)
    assert not idle_roll_due(first_timestamp=NOW - 5000, now_ms=NOW, **{**kw, "high_watermark": 4})  # type: ignore[arg-type]
    assert not idle_roll_due(first_timestamp=NOW - 5000, now_ms=NOW, **{**kw, "active_size": 0})  # type: ignore[arg-type]
