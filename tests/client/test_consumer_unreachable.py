"""A consumer whose cluster is gone does not return nothing forever in silence: once
no node has answered for request_timeout_ms it logs a WARNING naming the last error,
once per outage, counts it in metrics(), and recovers when a node answers again."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.client.producer import Producer
from seglog.client.reachability import Reachability
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port


def test_reachability_reports_an_outage_once_it_lasts_the_timeout() -> None:
    r = Reachability(timeout_s=1.0)
    assert r.failed(10.0, "refused") is None  # the outage starts
    assert r.failed(10.9, "refused") is None
    warning = r.failed(11.0, "refused again")
    assert warning is not None and "refused again" in warning and "1000" in warning
    assert r.failed(15.0, "refused") is None  # once per outage
    assert r.unreachable_s(15.0) == pytest.approx(5.0)
    r.succeeded()
    assert r.unreachable_s(16.0) == 0.0
    assert r.failed(20.0, "x") is None  # a new outage starts its own clock
    assert r.failed(21.5, "x") is not None
    assert r.counters == {"request_failures_total": 6, "unreachable_reports_total": 2}


def test_a_consumer_warns_when_no_node_answers_and_recovers_when_one_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    consumer = Consumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        auto_offset_reset="earliest",
        request_timeout_ms=1000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=200,
    )
    tp = TopicPartition("gone", 0)
    consumer.assign([tp])
    caplog.set_level(logging.WARNING, logger="seglog.client.consumer")
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            assert consumer.poll(timeout_ms=200) == {}
        warnings = [r for r in caplog.records if r.name == "seglog.client.consumer"]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "no node reachable" in warnings[0].getMessage()
        assert f"127.0.0.1:{port}" in warnings[0].getMessage()
        m = consumer.metrics()
        assert m["unreachable-reports-total"] == 1
        assert m["request-failures-total"] >= 2
        assert m["unreachable-seconds"] >= 2.0

        node = NodeProcess(tmp_path, port=port).start()
        try:
            with Admin(bootstrap_servers=node.bootstrap) as admin:
                admin.create_topics([NewTopic("gone", 1, 1)])
            with Producer(bootstrap_servers=node.bootstrap, acks="all") as producer:
                producer.send("gone", b"back").get(timeout=20)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got += [r.value for r in consumer.poll(timeout_ms=500).get(tp, [])]
            assert got == [b"back"]
            assert consumer.metrics()["unreachable-seconds"] == 0.0
        finally:
            node.stop()
    finally:
        consumer.close()
