"""A thawed node must not lead from the metadata it had before it froze (issue 39).

A broker out of touch with its controller process for longer than a session (either
process frozen) refuses produces with NOT_LEADER_OR_FOLLOWER: it is fenced by then and
its leaderships have moved. Once it hears its controller again it must go on refusing
until its image has applied what the quorum committed meanwhile. Before the fix it took
produces again as soon as it heard its controller, for the few milliseconds until the
fence and the new leaders reached its image: a stale leader. A producer whose previous
request it had refused got OUT_OF_ORDER_SEQUENCE_NUMBER there (the sequence it refused
was missing), which no Kafka broker answers in this situation (a leader that lost its
partition answers NOT_LEADER_OR_FOLLOWER). librdkafka answers that error by bumping
its epoch and renumbering every unacknowledged record, written ones included: the
duplicate of chaos run broker-frozen seed 31
(docs/chaos-reports/2026-12-02-gray-failures/README.md).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from kafka.protocol.producer import InitProducerIdRequest
from test_frozen_broker import SESSION_MS, TOPIC, local_run

from seglog.chaos.targets import CONTROLLER_MODULE
from seglog.harness.cluster import topic_of
from seglog.harness.kafka_cluster import KafkaConnection, response_class
from seglog.harness.kafka_cluster import produce_request as kafka_produce_request
from seglog.storage.record_batch import NewRecord, build_batch

NOT_LEADER_OR_FOLLOWER = 6
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
THAWED_WATCH_S = 5.0


def produce_request(pid: int, epoch: int, seq: int, partition: int) -> Any:
    """One idempotent acks=all record."""
    records = build_batch(
        [NewRecord(b"thaw-%d" % seq)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    return kafka_produce_request(TOPIC, partition, records, version=7, timeout_ms=3_000)


def error_code(decoded: Any) -> int:
    return int(decoded.responses[0].partition_responses[0].error_code)


def produce(conn: KafkaConnection, pid: int, epoch: int, seq: int, partition: int) -> int:
    """The partition's error code."""
    return error_code(conn.request(produce_request(pid, epoch, seq, partition))[1])


def image_epoch(cluster: Any, node: int, partition: int) -> int:
    """The leader epoch of `partition` in `node`'s metadata image."""
    t = topic_of(cluster.metadata(node, [TOPIC]), TOPIC)
    assert t is not None
    return int(next(p.leader_epoch for p in t.partitions if p.partition == partition))


@pytest.mark.parametrize("frozen", ["controller", "broker"])
def test_a_thawed_broker_refuses_produces_until_its_metadata_caught_up(tmp_path, frozen):
    from seglog.harness.processes import child_pid

    with local_run(tmp_path / "cluster") as run:
        cluster, victim, partition = run.cluster, run.victim, run.led[0]
        broker = cluster.nodes[victim].proc
        assert broker is not None
        conn = KafkaConnection(cluster.kafka_ports[victim])
        try:
            _, r = conn.request(
                InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60_000)
            )
            assert r.error_code == 0, r
            pid, epoch = r.producer_id, r.producer_epoch
            assert produce(conn, pid, epoch, 0, partition) == 0
            led_at = image_epoch(cluster, victim, partition)
            process = broker.pid
            if frozen == "controller":
                found = child_pid(broker.pid, CONTROLLER_MODULE)
                assert found is not None, "no controller process under the broker"
                process = found
            os.kill(process, signal.SIGSTOP)
            try:
                if frozen == "broker":
                    # Waits in the socket until the thaw, behind nothing: the first
                    # thing the thawed broker is asked.
                    pipelined = produce_request(pid, epoch, 1, partition)
                    conn.send(pipelined)
                cluster.wait(
                    "the partition led elsewhere", lambda: run.failed_over() or None, timeout_s=20
                )
                time.sleep(SESSION_MS / 1000)  # and its controller silent for longer
                if frozen == "controller":
                    # Refused: the controller has been silent for more than a session.
                    assert produce(conn, pid, epoch, 1, partition) == NOT_LEADER_OR_FOLLOWER
            finally:
                os.kill(process, signal.SIGCONT)
            answers: list[int] = []
            stale: list[int] = []
            if frozen == "broker":
                frame = conn.read_frame()
                decoded = response_class(pipelined).decode(frame[4:], version=7)
                answers.append(error_code(decoded))
            # Sequence 2, again and again, each answer with the leader epoch the
            # broker's image holds after it, until that epoch is no longer the one the
            # broker led at before the freeze.
            deadline = time.monotonic() + THAWED_WATCH_S
            while time.monotonic() < deadline:
                answer = produce(conn, pid, epoch, 2, partition)
                answers.append(answer)
                if image_epoch(cluster, victim, partition) != led_at:
                    break
                stale.append(answer)
                time.sleep(0.002)
        finally:
            conn.close()
        print(f"answers after the thaw: {answers}; from the old image: {stale}")
        # From the image it had before it froze, the broker refuses every produce: it
        # does not take sequence 2 as a leader after refusing sequence 1 as none.
        # Before the fix: [6, 45, 45, ...] (the controller frozen). Once its image moved
        # on it answers as any broker would (45, should it lead again: sequence 1 is
        # missing from its log).
        assert set(stale) <= {NOT_LEADER_OR_FOLLOWER}, stale
        run.wait_rejoined("the thawed broker unfenced and in every ISR")
