"""Disk faults on a real node process, injected through SEGLOG_FAULT_INJECTION_FILE
(storage/disk_and_clock.py): a full disk fails produces with KAFKA_STORAGE_ERROR and
nothing else (reads go on, the node stays up, produces succeed once space returns);
a failed fsync takes the only log dir offline and the node halts with exit code 1,
keeping every acknowledged record (docs/disk-and-clock-faults.md)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import grpc
import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.harness.node_process import NodeProcess
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2
from seglog.storage.disk_and_clock import ENV
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

E = errors_pb2.ErrorCode
TOPIC = "disk"
WAIT_S = 30.0


def set_faults(path: Path, **faults: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, path)
    time.sleep(0.2)  # the node re-reads a changed file within 50 ms


def start_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[NodeProcess, Path]:
    faults = tmp_path / "faults.json"
    faults.write_text("{}")
    monkeypatch.setenv(ENV, str(faults))  # the child process inherits it
    node = NodeProcess(
        tmp_path / "node",
        overrides={
            "log.dirs": str(tmp_path / "node" / "logs"),  # one log dir, as Kafka halts then
            "replica.high.watermark.checkpoint.interval.ms": "500",
        },
    )
    node.start()
    with Admin(node.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1, {"retention.ms": "-1"})])
    return node, faults


def produce(stub: client_pb2_grpc.SegLogStub, value: bytes) -> pb.PartitionProduceResponse:
    batch = build_batch([NewRecord(value, b"k", int(time.time() * 1000))])
    response = stub.Produce(
        pb.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            topics=[
                pb.TopicProduceData(
                    name=TOPIC, partitions=[pb.PartitionProduceData(partition=0, records=batch)]
                )
            ],
        ),
        timeout=10,
    )
    return response.topics[0].partitions[0]


def fetch_values(stub: client_pb2_grpc.SegLogStub) -> tuple[int, list[bytes]]:
    response = stub.Fetch(
        pb.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                pb.FetchTopic(
                    name=TOPIC,
                    partitions=[
                        pb.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
        ),
        timeout=10,
    )
    answer = response.topics[0].partitions[0]
    values = [
        r.value or b""
        for pos, h in iter_batches(answer.records)
        for r in decode_records(answer.records, pos, h)
    ]
    return answer.error_code, values


def produced_until_ok(
    stub: client_pb2_grpc.SegLogStub, value: bytes
) -> pb.PartitionProduceResponse:
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = produce(stub, value)
        if answer.error_code == E.NONE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)  # the partition's leadership is still being set up


def test_full_disk_fails_produces_then_a_failed_fsync_halts_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One node for both faults (a node start is most of the time): first the disk
    fills up and empties again, then an fsync fails."""
    node, faults = start_node(tmp_path, monkeypatch)
    try:
        with grpc.insecure_channel(node.bootstrap) as channel:
            stub = client_pb2_grpc.SegLogStub(channel)
            assert produced_until_ok(stub, b"v-0").error_code == E.NONE
            for i in range(1, 5):
                assert produce(stub, b"v-%d" % i).error_code == E.NONE
            set_faults(faults, disk_free_bytes=30)  # less than a batch: a partial write
            for i in range(3):
                answer = produce(stub, b"while-full-%d" % i)
                assert answer.error_code == E.KAFKA_STORAGE_ERROR, answer
            error, values = fetch_values(stub)
            assert error == E.NONE and values == [b"v-%d" % i for i in range(5)]
            set_faults(faults)  # space returns
            answer = produce(stub, b"v-5")
            assert (answer.error_code, answer.base_offset) == (E.NONE, 5), answer
            assert node.proc is not None and node.proc.poll() is None
            events = [
                json.loads(line) for line in node.log_path.read_text().splitlines() if "{" in line
            ]
            assert any(e.get("event") == "log_dir_full" for e in events)
            assert not any(e.get("event") == "log_dir_failed" for e in events)

            for i in range(6, 19):
                assert produce(stub, b"v-%d" % i).error_code == E.NONE
            set_faults(faults, fsync_failure=True)
            # A checkpoint is written (and fsynced) only when its offsets changed: the
            # last record goes after the fault, so the next HW checkpoint (every 500 ms
            # here) has one to write, and its fsync fails. Appended before that, the
            # record is answered, or the node halted first (then it may or may not be
            # there after the restart, as with any unanswered produce).
            last_acked = False
            with contextlib.suppress(grpc.RpcError):
                last_acked = produce(stub, b"v-19").error_code == E.NONE
            code = node.proc.wait(WAIT_S)
        assert code == 1, node.tail()
        text = node.log_path.read_text()
        assert '"event":"log_dir_failed"' in text and "injected fsync failure" in text
        node.proc = None
        # Without the clean-shutdown marker the restart recovers, and keeps what was acknowledged.
        set_faults(faults)
        node.start()
        with grpc.insecure_channel(node.bootstrap) as channel:
            stub = client_pb2_grpc.SegLogStub(channel)
            deadline = time.monotonic() + WAIT_S
            while True:
                error, values = fetch_values(stub)
                if error == E.NONE or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert values[:19] == [b"v-%d" % i for i in range(19)]
            may_hold = [[b"v-19"]] if last_acked else [[b"v-19"], []]
            assert values[19:] in may_hold, values[19:]
        assert '"clean_shutdown":false' in node.log_path.read_text()
        assert node.stop() == 0  # a clean stop once the disk is whole again
    finally:
        node.stop()
