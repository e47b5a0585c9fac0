"""Kafka's windowed Avg and Max (client/sampled_stat.py), time given as an input."""

from __future__ import annotations

import math

import pytest

from seglog.client.sampled_stat import SampledStat


def test_nothing_recorded_reads_nan():
    stat = SampledStat()
    assert math.isnan(stat.avg(0.0)) and math.isnan(stat.max(0.0))


def test_avg_and_max_over_one_window():
    stat = SampledStat(num_samples=2, window_s=30.0)
    for t, v in ((0.0, 10.0), (1.0, 20.0), (2.0, 30.0)):
        stat.record(v, t)
    assert stat.avg(3.0) == 20.0
    assert stat.max(3.0) == 30.0


def test_a_window_expires_after_num_samples_windows():
    stat = SampledStat(num_samples=2, window_s=30.0)
    stat.record(100.0, 0.0)
    stat.record(1.0, 31.0)  # the first window is 31 s old: a second one starts
    assert stat.avg(31.0) == 50.5 and stat.max(31.0) == 100.0
    # The first window started 60 s ago: it no longer counts, the second still does.
    assert stat.avg(60.0) == 1.0 and stat.max(60.0) == 1.0
    assert math.isnan(stat.avg(91.0)) and math.isnan(stat.max(91.0))


def test_only_num_samples_windows_are_kept():
    stat = SampledStat(num_samples=2, window_s=10.0)
    stat.record(1000.0, 0.0)
    stat.record(2.0, 10.0)
    stat.record(4.0, 19.0)  # still the second window
    assert stat.avg(19.0) == pytest.approx(1006 / 3)
    stat.record(6.0, 20.0)  # a third window: the first one (1000) is dropped
    assert stat.avg(20.0) == 4.0
    assert stat.max(20.0) == 6.0


@pytest.mark.parametrize(("samples", "window"), [(0, 30.0), (2, 0.0), (2, -1.0)])
def test_bad_settings_are_refused(samples: int, window: float):
    with pytest.raises(ValueError, match="num_samples"):
        SampledStat(samples, window)
