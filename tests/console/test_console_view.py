"""The console's logic without I/O: how bytes are shown, the topic list's filter and
pages, counter rates, the /metrics lines it reads, the lag rows and the reset rule."""

from __future__ import annotations

import json

import pytest

from seglog.client.admin import GroupInformation, MemberInformation, PartitionDescription
from seglog.client.admin import TopicDescription as Topic
from seglog.client.cluster import TopicPartition
from seglog.client.group_coordinator import OffsetAndMetadata
from seglog.console import groups, scrape, view
from seglog.console.decode import MAX_SHOWN_BYTES, show


def test_bytes_are_shown_as_json_text_or_hex() -> None:
    assert show(None).kind == "null"
    shown = show(b'{"a":[1,2],"b":"\xc3\xa9"}')
    assert shown.kind == "json" and json.loads(shown.text) == {"a": [1, 2], "b": "é"}
    assert shown.text.startswith('{\n  "a": [')
    assert show(b"{not json").kind == "text"
    assert show(b"plain").text == "plain"
    assert show(b"\x00\x01\xff").text == "00 01 ff"
    assert show(b"bell\x07").kind == "hex"  # control characters are not text
    # A long value is cut; a character cut in half at the limit is dropped, not hex.
    long = "é".encode() * MAX_SHOWN_BYTES
    cut = show(long)
    assert cut.kind == "text" and cut.truncated and cut.size == len(long)
    assert set(cut.text) == {"é"}


def _topic(name: str, partitions: int, isr_short: int = 0, offline: int = 0) -> Topic:
    parts = []
    for p in range(partitions):
        leader = -1 if p < offline else 1
        isr = (1,) if p < isr_short else (1, 2, 3)
        parts.append(PartitionDescription(p, leader, 0, (1, 2, 3), isr, ()))
    return Topic(name, f"id-{name}", tuple(parts), name.startswith("__"))


def test_summary_counts_and_topic_pages() -> None:
    topics = (
        _topic("__consumer_offsets", 50),
        _topic("orders", 3, isr_short=1),
        _topic("payments", 2, offline=1),
        *(_topic(f"t-{i:03d}", 1) for i in range(120)),
    )
    snap = view.Snapshot(1, 0.0, "c", 1, (), None, topics)
    s = view.summarize(snap)
    assert (s.topics, s.partitions, s.under_replicated, s.offline) == (123, 175, 1, 1)
    rows = view.topic_rows(snap)
    first = view.filter_topics(rows, "", 1, internal=False)
    assert (first.matched, first.pages, len(first.rows)) == (122, 3, 50)
    assert first.rows[0].name == "orders"
    last = view.filter_topics(rows, "", 99, internal=False)  # clamped
    assert last.page == 3 and len(last.rows) == 22
    assert [r.name for r in view.filter_topics(rows, "PAY", 1, False).rows] == ["payments"]
    assert view.filter_topics(rows, "consumer", 1, internal=False).matched == 0
    assert view.filter_topics(rows, "consumer", 1, internal=True).matched == 1
    leads, hosts = view.leadership(topics)
    assert leads[1] == 174 and hosts[2] == 175


def test_rates_and_the_metrics_lines_read() -> None:
    text = "\n".join(
        [
            "# HELP kafka_log_log_size bytes",
            'kafka_log_log_size{partition="0",topic="orders"} 1234.0',
            'kafka_log_log_logendoffset{partition="0",topic="orders"} 42.0',
            'kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 1000.0',
            'kafka_server_brokertopicmetrics_bytesin_created{topic="orders"} 1.7e9',
            'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 10.0',
            "kafka_server_replicamanager_partitioncount 3.0",
        ]
    )
    m = scrape.parse(text)
    assert m.partition_size == {("orders", 0): 1234}
    assert m.log_end_offset == {("orders", 0): 42}
    assert m.bytes_in == {"orders": 1000.0} and m.messages_in == {"orders": 10.0}
    later = scrape.parse(text.replace("1000.0", "3000.0").replace("} 10.0", "} 30.0"))
    rates = view.topic_rates({1: m}, {1: later}, 2.0)
    assert rates["orders"].bytes_in_per_s == 1000.0 and rates["orders"].messages_in_per_s == 10.0
    assert view.rate(100.0, 50.0, 1.0) == 50.0  # the counter restarted with its node
    assert view.rate(None, 50.0, 1.0) is None


def _group(state: str, members: tuple[MemberInformation, ...] = ()) -> GroupInformation:
    return GroupInformation(0, "billing", state, "consumer", "range", members)


def test_lag_rows_and_the_reset_rule() -> None:
    a, b = TopicPartition("orders", 0), TopicPartition("orders", 1)
    member = MemberInformation("m-1", "client", "/127.0.0.1", None, (b,))
    rows = groups.lag_rows(_group("Stable", (member,)), {a: OffsetAndMetadata(5)}, {a: 20, b: 7})
    assert [(r.partition, r.current, r.log_end, r.lag, r.member) for r in rows] == [
        (0, 5, 20, 15, "-"),
        (1, None, 7, None, "m-1"),
    ]
    assert "current state is Stable" in (groups.refuse_reset(_group("Stable")) or "")
    assert groups.refuse_reset(_group("Empty")) is None
    low, high = {a: 3, b: 0}, {a: 20, b: 7}
    assert groups.reset_offsets("earliest", None, low, high) == {a: 3, b: 0}
    assert groups.reset_offsets("latest", None, low, high) == {a: 20, b: 7}
    assert groups.reset_offsets("offset", 10, low, high) == {a: 10, b: 7}  # clamped
    with pytest.raises(ValueError, match="needs the offset"):
        groups.reset_offsets("offset", None, low, high)
    with pytest.raises(ValueError, match="not one of"):
        groups.reset_offsets("yesterday", None, low, high)


def test_histories_and_group_lags_are_bounded_and_counted_once() -> None:
    h = view.Histories(points=3, names=2)
    for t in range(5):
        h.add(float(t), {"a": t * 1.0})
    h.add(5.0, {"b": 1.0})
    h.add(6.0, {"c": 2.0})  # "a" was updated longest ago: dropped
    assert h.frozen() == {"b": ((5.0, 1.0),), "c": ((6.0, 2.0),)}
    h.add(7.0, {"b": 3.0, "b2": 0.0})
    assert "c" not in h and list(h.frozen()) == ["b", "b2"]
    one, two = scrape.NodeMetrics(), scrape.NodeMetrics()
    one.group_lag = {("g", "t", 0): 5, ("g", "t", 1): 2}
    two.group_lag = {("g", "t", 0): 4, ("h", "t", 0): 9}  # a follower's older reading
    assert view.group_lags({1: one, 2: two}) == {"g": 7, "h": 9}


def test_retention_as_people_read_it() -> None:
    from seglog.console.app import _duration_ms

    assert [_duration_ms(v) for v in ("86400000", "-1", "7200000", "90000", "1500", None)] == [
        "1 d", "forever", "2 h", "90 s", "1500 ms", "-",
    ]  # fmt: skip
