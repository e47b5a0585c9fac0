"""The checker's order and commit anomalies on hand-made histories: non-monotonic
sends per producer, skipped and non-monotonic polls per consumer, committed offsets
going backwards, lost commits, duplicated commits (chaos/checker.py). Each is caught
and its clean counterpart passes."""

from __future__ import annotations

from typing import Any

from test_checker import H, check_history


class G(H):
    """H plus a consumer group's events: acknowledged commits, committed-offset
    reads (with when they started) and group members' polls."""

    def commit(self, partition: int, offset: int, member: str = "m0", group: str = "g") -> G:
        self._add(type="commit", process=member, group=group, partition=partition, offset=offset)
        return self

    def committed(
        self, partition: int, offset: int, *, started: float | None = None, observer: str = "w"
    ) -> G:
        t0 = self.t if started is None else started
        self._add(
            type="committed", process=observer, group="g", partition=partition, offset=offset, t0=t0
        )
        return self

    def member_poll(self, partition: int, offset: int, value: str, member: str = "m0") -> G:
        self._add(
            type="poll", process=member, group="g", partition=partition, offset=offset, value=value
        )
        return self


def sends(*acks: tuple[str, int, int, str]) -> G:
    h = G()
    for value, partition, offset, producer in acks:
        h.ack(value, partition, offset, producer)
    return h


def group_history() -> G:
    """Three records read and committed by m0, then m1 takes over from the commit."""
    h = sends(("a", 0, 0, "p0"), ("b", 0, 1, "p0"), ("c", 0, 2, "p0"))
    h.member_poll(0, 0, "a").member_poll(0, 1, "b").commit(0, 2).committed(0, 2)
    h.member_poll(0, 2, "c", "m1").commit(0, 3, "m1").committed(0, 3)
    return h


def test_sends_acknowledged_in_send_order_pass() -> None:
    # Two producers interleaved on one partition, and a failed send in between.
    h = sends(("a", 0, 0, "p0"), ("x", 0, 1, "p1"), ("b", 0, 2, "p0"))
    h.fail("lost-in-flight", 0, definite=False, process="p0")
    h.ack("c", 0, 3, "p0").ack("d", 1, 0, "p0")
    r = check_history(h.events)
    assert r.nonmonotonic_send == 0


def test_sends_acknowledged_out_of_send_order_are_caught() -> None:
    h = G()
    # p0 sends a then b, but b is acknowledged at the lower offset (a reordered retry).
    h._add(type="invoke", process="p0", value="a", partition=0)
    h._add(type="invoke", process="p0", value="b", partition=0)
    h._add(type="ok", process="p0", value="b", partition=0, offset=0)
    h._add(type="ok", process="p0", value="a", partition=0, offset=1)
    h.seek(0, 0).poll(0, 0, "b").poll(0, 1, "a")
    r = check_history(h.events)
    assert not r.ok and r.failed_invariants() == ["nonmonotonic_send"]
    assert r.nonmonotonic_send == 1
    assert r.examples.nonmonotonic_send[0] == {
        "producer": "p0",
        "partition": 0,
        "sent_first": {"value": "a", "offset": 1},
        "sent_after": {"value": "b", "offset": 0},
    }


def test_polls_are_checked_per_consumer_not_across_them() -> None:
    h = sends(("a", 0, 0, "p0"), ("b", 0, 1, "p0"), ("c", 0, 2, "p0"))
    # Two consumers interleaved, each in order: neither skips nor goes back.
    h.seek(0, 0, "c0").seek(0, 0, "c1").poll(0, 0, "a", "c0").poll(0, 0, "a", "c1")
    h.poll(0, 1, "b", "c0").poll(0, 1, "b", "c1").poll(0, 2, "c", "c0").poll(0, 2, "c", "c1")
    assert check_history(h.events).ok
    # c1 then skips one offset and c0 goes back: each is one anomaly of its consumer.
    h.ack("d", 0, 3, "p0").ack("e", 0, 4, "p0")
    h.poll(0, 4, "e", "c1").poll(0, 1, "b", "c0")
    r = check_history(h.events)
    assert (r.skipped, r.backwards) == (1, 1)
    assert r.examples.skipped[0]["consumer"] == "c1"
    assert r.examples.backwards[0]["consumer"] == "c0"


def test_a_clean_group_history_passes() -> None:
    r = check_history(group_history().events)
    assert r.ok, r.failed_invariants()
    assert r.commits == 2


def test_a_commit_below_an_acknowledged_one_goes_backwards() -> None:
    h = group_history().commit(0, 1, "m2")  # a member commits behind the group
    r = check_history(h.events)
    assert r.failed_invariants() == ["commit_backwards"]
    example: dict[str, Any] = r.examples.commit_backwards[0]
    assert (example["committed"], example["after"], example["by"]) == (1, 3, "m2")


def test_an_observer_reading_a_lower_committed_offset_goes_backwards() -> None:
    h = G().committed(0, 5).committed(0, 4)
    r = check_history(h.events)
    assert r.commit_backwards == 1 and r.lost_commits == 0
    assert r.examples.commit_backwards[0]["read_before"] == 5


def test_a_commit_not_seen_by_a_later_read_is_lost() -> None:
    h = group_history()
    h.committed(0, 2, observer="w2")  # started after the commit of 3 was acknowledged
    r = check_history(h.events)
    assert r.lost_commits == 1 and r.commit_backwards == 0
    assert r.examples.lost_commits[0]["acknowledged"] == 3
    assert r.examples.lost_commits[0]["read"] == 2


def test_a_read_started_before_the_commit_may_miss_it() -> None:
    h = group_history()
    before = h.events[-3]["t"] - 0.001  # before the commit of 3 was acknowledged
    h.committed(0, 2, started=before, observer="w2")
    r = check_history(h.events)
    assert r.lost_commits == 0 and r.ok


def test_a_record_polled_again_below_the_committed_offset_is_a_duplicated_commit() -> None:
    h = group_history().member_poll(0, 1, "b", "m2")  # the group committed 3 already
    r = check_history(h.events)
    assert r.failed_invariants() == ["duplicated_commits"]
    assert r.examples.duplicated_commits[0]["offset"] == 1
    assert r.examples.duplicated_commits[0]["committed"] == 3
    # At the committed offset itself is where a new member starts: fine.
    h2 = group_history().ack("d", 0, 3, "p0").member_poll(0, 3, "d", "m2")
    assert check_history(h2.events).ok


def test_an_implicit_ack_of_a_value_never_read_fails_the_run() -> None:
    from seglog.chaos.column_checker import check_columns
    from seglog.chaos.columns import ColumnHistory

    events = [
        {"type": "invoke", "t": 1.0, "process": "p0", "value": "p0-0", "partition": 0},
        {"type": "invoke", "t": 1.1, "process": "p0", "value": "p0-1", "partition": 0},
        {"type": "ok", "t": 1.2, "process": "p0", "value": "p0-1", "partition": 0, "offset": 0},
        {"type": "ok", "t": 1.2, "process": "p0", "value": "p0-0", "partition": 0},  # implicit
        {
            "type": "implicit_ack",
            "t": 1.2,
            "process": "p0",
            "partition": 0,
            "msgids": [1, 1],
            "values": ["p0-0"],
        },
        {"type": "poll", "t": 2.0, "process": "c0", "partition": 0, "offset": 0, "value": "p0-1"},
    ]
    for result in (check_history(events), check_columns(ColumnHistory.from_events(events))):
        assert result.implicit_acks == 1 and result.implicit_ack_missing == 1
        assert "implicit_ack_missing" in result.failed_invariants()
        assert result.examples.implicit_ack_missing[0]["value"] == "p0-0"
    # Read after all: the implicit ack was right, nothing is flagged.
    read = [*events, {**events[-1], "offset": 1, "value": "p0-0"}]
    assert check_history(read).implicit_ack_missing == 0


def test_librdkafka_implicit_ack_lines_become_history_events() -> None:
    import logging

    from seglog.chaos.implicit_acks import ImplicitAckRecorder

    recorded: list[dict] = []
    recorder = ImplicitAckRecorder("p0", recorded.append)
    for i in range(4):
        recorder.sent(0, f"p0-{i}")
    recorder.sent(1, "p0-4")
    log = recorder.logger()
    # A line as librdkafka 2.x writes it with debug=eos (seen in tests/kafka/test_implicit_ack.py
    # against the KIP-360 rule).
    log.log(
        logging.DEBUG,
        "%s",
        "IMPLICITACK [thrd:127.0.0.1:46561/1]: 127.0.0.1:46561/1: chaos [0] 2 message(s) "
        "implicitly acked by subsequent batch success (msgids 2..3, last acked 4)",
    )
    log.log(logging.DEBUG, "%s", "DRAIN [thrd:x]: chaos [0] beginning partition drain")
    assert [(e["type"], e["partition"], e["values"]) for e in recorded] == [
        ("implicit_ack", 0, ["p0-1", "p0-2"])
    ]
    assert recorder.implicit_acks == 2


def test_a_failing_history_write_does_not_escape_librdkafkas_log_callback() -> None:
    """An exception out of the logger would come back from confluent-kafka's next flush as
    a SystemError naming no cause: the recorder keeps it for the run's report instead."""
    import logging

    from seglog.chaos.implicit_acks import ImplicitAckRecorder

    def closed_history(event: dict) -> None:
        raise ValueError("history closed")

    recorder = ImplicitAckRecorder("p0", closed_history)
    recorder.sent(0, "p0-0")
    recorder.logger().log(
        logging.DEBUG,
        "%s",
        "IMPLICITACK [thrd:127.0.0.1:1/1]: 127.0.0.1:1/1: chaos [0] 1 message(s) "
        "implicitly acked by subsequent batch success (msgids 1..1, last acked 2)",
    )
    assert recorder.callback_errors == ["log callback: ValueError: history closed"]
