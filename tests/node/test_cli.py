"""The `seglog` tools (topics, produce, consume, get-offsets) run as subprocesses
against a real node: output format, exit codes and one-line errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import grpc
import pytest

from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc
from seglog.storage.record_batch import NewRecord, build_batch


def seglog(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args],
        input=data,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def ok(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    r = seglog(*args, stdin=stdin)
    assert r.returncode == 0, f"{args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def fails(*args: str, stdin: str | None = None) -> str:
    """Run a command that must fail cleanly; its single stderr line."""
    r = seglog(*args, stdin=stdin)
    assert r.returncode == 1, f"{args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def topics(node: NodeProcess, *args: str) -> list[str]:
    return ["topics", "--bootstrap-server", node.bootstrap, *args]


def create(node: NodeProcess, topic: str, *extra: str) -> None:
    r = ok(*topics(node, "--create", "--topic", topic, *extra))
    assert r.stdout == f"Created topic {topic}.\n"


def produce_raw(node: NodeProcess, topic: str, records: list[NewRecord]) -> None:
    """Append one batch to partition 0 with chosen timestamps (a raw Produce RPC)."""
    with grpc.insecure_channel(node.bootstrap) as channel:
        request = pb.ProduceRequest(acks=-1, timeout_ms=10_000)
        request.topics.add(name=topic).partitions.add(partition=0, records=build_batch(records))
        response = client_pb2_grpc.SegLogStub(channel).Produce(request, timeout=10)
    assert response.topics[0].partitions[0].error_code == 0


# --- topics ------------------------------------------------------------------------------


def test_topics_create_describe_list(shared_node: NodeProcess) -> None:
    create(shared_node, "described", "--partitions", "3", "--config", "segment.bytes=100000")
    assert "described" in ok(*topics(shared_node, "--list")).stdout.splitlines()

    out = ok(*topics(shared_node, "--describe", "--topic", "described")).stdout
    lines = out.splitlines()
    assert re.fullmatch(
        r"Topic: described\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\t"
        r"ReplicationFactor: 1\tConfigs: segment.bytes=100000",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        f"\tTopic: described\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tLeaderEpoch: 0"
        "\tHighWatermark: 0\tLogEndOffsets: 1:0"
        for p in range(3)
    ]

    # Without --topic: every topic, each with its header line.
    everything = ok(*topics(shared_node, "--describe")).stdout
    assert lines[0] in everything.splitlines()


def test_topics_create_defaults_and_if_not_exists(shared_node: NodeProcess) -> None:
    create(shared_node, "defaults")
    out = ok(*topics(shared_node, "--describe", "--topic", "defaults")).stdout
    # num.partitions=1 and no overrides: an empty Configs field.
    assert out.splitlines()[0].endswith("\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ")

    err = fails(*topics(shared_node, "--create", "--topic", "defaults"))
    assert err == "seglog topics: TOPIC_ALREADY_EXISTS: topic 'defaults' already exists"
    r = ok(*topics(shared_node, "--create", "--topic", "defaults", "--if-not-exists"))
    assert r.stdout == ""


def test_topics_create_errors(shared_node: NodeProcess) -> None:
    err = fails(*topics(shared_node, "--create", "--topic", "rf", "--replication-factor", "3"))
    assert err.startswith("seglog topics: INVALID_REPLICATION_FACTOR: ")
    assert "replication factor 3" in err

    err = fails(
        *topics(shared_node, "--create", "--topic", "cfg", "--config", "retention.ms=forever")
    )
    assert err.startswith("seglog topics: INVALID_CONFIG: ")
    assert "retention.ms" in err and "forever" in err

    err = fails(*topics(shared_node, "--create", "--topic", "cfg", "--config", "retention.ms"))
    assert err == "seglog topics: --config 'retention.ms' is not key=value"

    err = fails(*topics(shared_node, "--create", "--topic", "parts", "--partitions", "0"))
    assert err.startswith("seglog topics: INVALID_PARTITIONS: ")

    listed = ok(*topics(shared_node, "--list")).stdout.splitlines()
    assert not {"rf", "cfg", "parts"} & set(listed)


def test_topics_unknown_topic(shared_node: NodeProcess) -> None:
    expected = "seglog topics: UNKNOWN_TOPIC_OR_PARTITION: topic 'ghost' does not exist"
    assert fails(*topics(shared_node, "--describe", "--topic", "ghost")) == expected
    assert fails(*topics(shared_node, "--delete", "--topic", "ghost")) == expected
    assert (
        fails(*topics(shared_node, "--alter", "--topic", "ghost", "--config", "retention.ms=1"))
        == expected
    )
    assert ok(*topics(shared_node, "--delete", "--topic", "ghost", "--if-exists")).stdout == ""
    assert ok(*topics(shared_node, "--describe", "--topic", "ghost", "--if-exists")).stdout == ""


def test_topics_alter_configs(shared_node: NodeProcess) -> None:
    create(shared_node, "altered", "--config", "segment.bytes=100000")
    r = ok(
        *topics(
            shared_node,
            "--alter",
            "--topic",
            "altered",
            "--config",
            "retention.ms=60000",
            "--config",
            "max.message.bytes=5000",
            "--delete-config",
            "segment.bytes",
        )
    )
    assert r.stdout == "Updated config for topic altered.\n"
    header = ok(*topics(shared_node, "--describe", "--topic", "altered")).stdout.splitlines()[0]
    assert header.endswith("\tConfigs: max.message.bytes=5000,retention.ms=60000")

    err = fails(
        *topics(shared_node, "--alter", "--topic", "altered", "--config", "retention.ms=-7")
    )
    assert err.startswith("seglog topics: INVALID_CONFIG: ") and "retention.ms" in err
    err = fails(*topics(shared_node, "--alter", "--topic", "altered"))
    assert "--config" in err and "--delete-config" in err
    header = ok(*topics(shared_node, "--describe", "--topic", "altered")).stdout.splitlines()[0]
    assert header.endswith("\tConfigs: max.message.bytes=5000,retention.ms=60000")


def test_topics_delete(shared_node: NodeProcess) -> None:
    create(shared_node, "doomed")
    assert ok(*topics(shared_node, "--delete", "--topic", "doomed")).stdout == ""
    assert "doomed" not in ok(*topics(shared_node, "--list")).stdout.splitlines()


def test_topics_option_errors(shared_node: NodeProcess) -> None:
    err = fails(*topics(shared_node, "--list", "--partitions", "3"))
    assert err == "seglog topics: option --partitions can't be used with --list"
    assert fails(*topics(shared_node, "--create")) == "seglog topics: --create needs --topic"
    # argparse: exactly one action.
    r = seglog(*topics(shared_node, "--list", "--describe"))
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


def test_bad_bootstrap_server_value() -> None:
    err = fails("topics", "--bootstrap-server", "localhost", "--list")
    assert (
        err == "seglog topics: --bootstrap-server 'localhost': bootstrap server 'localhost' "
        "is not host:port"
    )
    err = fails("get-offsets", "--bootstrap-server", "localhost:99999", "--topic", "x")
    assert "port 99999 is out of range" in err


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "--list"],
        ["topics", "--create", "--topic", "x"],
        ["produce", "--topic", "x"],
        ["consume", "--topic", "x", "--max-messages", "1"],
        ["get-offsets", "--topic", "x"],
    ],
)
def test_unreachable_node_is_one_clear_line(command: list[str]) -> None:
    port = free_port()
    err = fails(
        *command,
        "--bootstrap-server",
        f"127.0.0.1:{port}",
        "--request-timeout-ms",
        "1000",
        stdin="a\n",
    )
    tool = command[0]
    assert err.startswith(f"seglog {tool}: NO_BROKERS_AVAILABLE: cannot reach 127.0.0.1:{port}")
    assert "connection refused" in err


# --- produce and consume ---------------------------------------------------------------


def console(node: NodeProcess, tool: str, topic: str, *args: str) -> list[str]:
    return [tool, "--bootstrap-server", node.bootstrap, "--topic", topic, *args]


def test_produce_then_consume_from_beginning(shared_node: NodeProcess) -> None:
    create(shared_node, "lines")
    r = ok(*console(shared_node, "produce", "lines"), stdin="first\nsecond\n\nfourth line\n")
    assert r.stdout == ""
    r = ok(*console(shared_node, "consume", "lines", "--from-beginning", "--max-messages", "4"))
    assert r.stdout == "first\nsecond\n\nfourth line\n"
    assert r.stderr.splitlines()[-1] == "Processed a total of 4 messages"

    # --max-messages stops early; --timeout-ms ends a read that runs dry.
    r = ok(*console(shared_node, "consume", "lines", "--from-beginning", "--max-messages", "2"))
    assert r.stdout == "first\nsecond\n"
    assert r.stderr.splitlines()[-1] == "Processed a total of 2 messages"
    r = ok(*console(shared_node, "consume", "lines", "--from-beginning", "--timeout-ms", "2000"))
    assert r.stdout.splitlines() == ["first", "second", "", "fourth line"]
    assert r.stderr.splitlines()[-1] == "Processed a total of 4 messages"


def test_consume_defaults_to_new_records_only(shared_node: NodeProcess) -> None:
    create(shared_node, "only-new")
    ok(*console(shared_node, "produce", "only-new"), stdin="old\n")
    r = ok(*console(shared_node, "consume", "only-new", "--timeout-ms", "1000"))
    assert r.stdout == ""
    assert r.stderr.splitlines()[-1] == "Processed a total of 0 messages"


def test_keys_and_print_properties(shared_node: NodeProcess) -> None:
    create(shared_node, "keyed")
    ok(
        *console(
            shared_node,
            "produce",
            "keyed",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ),
        stdin="k1:v1\nk2:v:2\n:empty-key\n",
    )
    r = ok(
        *console(
            shared_node,
            "consume",
            "keyed",
            "--from-beginning",
            "--max-messages",
            "3",
            "--property",
            "print.key=true",
            "--property",
            "print.offset=true",
            "--property",
            "print.partition=true",
            "--property",
            "print.timestamp=true",
        )
    )
    lines = r.stdout.splitlines()
    expected = [("0", "k1", "v1"), ("1", "k2", "v:2"), ("2", "", "empty-key")]
    assert len(lines) == 3
    for line, (offset, key, value) in zip(lines, expected, strict=True):
        m = re.fullmatch(r"CreateTime:(\d+)\tPartition:0\tOffset:(\d+)\t(.*)\t(.*)", line)
        assert m, line
        assert int(m[1]) > 1_600_000_000_000
        assert (m[2], m[3], m[4]) == (offset, key, value)

    # Only the key, with a chosen separator; a record without key prints null.
    ok(*console(shared_node, "produce", "keyed"), stdin="no-key\n")
    r = ok(
        *console(
            shared_node,
            "consume",
            "keyed",
            "--partition",
            "0",
            "--offset",
            "1",
            "--max-messages",
            "3",
            "--property",
            "print.key=true",
            "--property",
            "key.separator= => ",
        )
    )
    assert r.stdout == "k2 => v:2\n => empty-key\nnull => no-key\n"


def test_headers_and_null_marker(shared_node: NodeProcess) -> None:
    create(shared_node, "headed")
    ok(
        *console(
            shared_node,
            "produce",
            "headed",
            "--property",
            "parse.headers=true",
            "--property",
            "parse.key=true",
            "--property",
            "null.marker=NULL",
        ),
        stdin="h1:a,h2:b\tkey\tvalue\nNULL\tNULL\tNULL\n",
    )
    r = ok(
        *console(
            shared_node,
            "consume",
            "headed",
            "--from-beginning",
            "--max-messages",
            "2",
            "--property",
            "print.headers=true",
            "--property",
            "print.key=true",
            "--property",
            "print.value=true",
        )
    )
    assert r.stdout == "h1:a,h2:b\tkey\tvalue\nnull\tnull\tnull\n"


def test_produce_compressed_and_to_a_partition(shared_node: NodeProcess) -> None:
    create(shared_node, "zipped", "--partitions", "2")
    lines = [f"line-{i}" for i in range(50)]
    ok(
        *console(
            shared_node, "produce", "zipped", "--compression-type", "gzip", "--partition", "1"
        ),
        stdin="".join(f"{x}\n" for x in lines),
    )
    r = ok(
        *console(
            shared_node,
            "consume",
            "zipped",
            "--partition",
            "1",
            "--offset",
            "earliest",
            "--max-messages",
            "50",
        )
    )
    assert r.stdout.splitlines() == lines
    offsets = ok("get-offsets", "--bootstrap-server", shared_node.bootstrap, "--topic", "zipped")
    assert offsets.stdout == "zipped:0:0\nzipped:1:50\n"


def test_produce_progress_on_stderr(shared_node: NodeProcess) -> None:
    create(shared_node, "many")
    r = ok(
        *console(shared_node, "produce", "many", "--progress-interval-ms", "1"),
        stdin="".join(f"{i}\n" for i in range(3000)),
    )
    progress = r.stderr.splitlines()
    assert progress, "no progress line"
    assert all(
        re.fullmatch(r"seglog produce: \d+ messages sent, \d+ acknowledged", x) for x in progress
    ), progress
    assert progress[-1] == "seglog produce: 3000 messages sent, 3000 acknowledged"


def test_produce_errors(shared_node: NodeProcess) -> None:
    create(shared_node, "strict")
    err = fails(
        *console(shared_node, "produce", "strict", "--property", "parse.key=true"),
        stdin="k\tv\nno separator here\n",
    )
    assert err == "seglog produce: No key separator found on line number 2: 'no separator here'"
    err = fails(*console(shared_node, "produce", "strict", "--property", "parse.keys=true"))
    assert err.startswith("seglog produce: unknown --property 'parse.keys'")
    err = fails(*console(shared_node, "produce", "strict", "--partition", "4"), stdin="x\n")
    assert "--partition 4" in err
    # The line before the bad one was sent and flushed.
    r = ok(*console(shared_node, "consume", "strict", "--from-beginning", "--timeout-ms", "2000"))
    assert r.stdout == "v\n"


def test_produce_reports_each_failed_record(shared_node: NodeProcess) -> None:
    create(shared_node, "tiny", "--config", "max.message.bytes=200")
    r = seglog(*console(shared_node, "produce", "tiny"), stdin="x" * 1000 + "\n")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith(
        "seglog produce: error sending line 1 (key: null, value: 1000 bytes) to topic tiny: "
    )
    assert "TOO_LARGE" in lines[0]
    assert lines[1] == "seglog produce: 1 of 1 messages failed"


def test_consume_errors(shared_node: NodeProcess) -> None:
    err = fails(*console(shared_node, "consume", "ghost", "--max-messages", "1"))
    assert err == "seglog consume: UNKNOWN_TOPIC_OR_PARTITION: topic 'ghost' does not exist"
    create(shared_node, "single")
    err = fails(*console(shared_node, "consume", "single", "--partition", "3"))
    assert err.startswith("seglog consume: UNKNOWN_TOPIC_OR_PARTITION: ")
    assert "no partition 3" in err
    err = fails(*console(shared_node, "consume", "single", "--offset", "5"))
    assert err == "seglog consume: --offset needs --partition"


# --- get-offsets -------------------------------------------------------------------------


def test_get_offsets(shared_node: NodeProcess) -> None:
    create(shared_node, "timed", "--partitions", "2")
    base = 1_700_000_000_000
    produce_raw(
        shared_node, "timed", [NewRecord(b"v%d" % i, timestamp=base + 1000 * i) for i in range(5)]
    )

    def offsets(*args: str) -> str:
        r = ok(
            "get-offsets", "--bootstrap-server", shared_node.bootstrap, "--topic", "timed", *args
        )
        return r.stdout

    assert offsets() == "timed:0:5\ntimed:1:0\n"
    assert offsets("--time", "latest") == offsets("--time", "-1") == "timed:0:5\ntimed:1:0\n"
    assert offsets("--time", "earliest") == "timed:0:0\ntimed:1:0\n"
    assert offsets("--time", "-2", "--partitions", "0") == "timed:0:0\n"
    # The first offset whose timestamp is at or after --time; none: empty.
    assert offsets("--time", str(base + 2500), "--partitions", "0") == "timed:0:3\n"
    assert offsets("--time", str(base), "--partitions", "0") == "timed:0:0\n"
    assert offsets("--time", str(base + 60_000), "--partitions", "0,1") == "timed:0:\ntimed:1:\n"
    assert offsets("--time", "max-timestamp", "--partitions", "0") == "timed:0:4\n"


def test_get_offsets_errors(shared_node: NodeProcess) -> None:
    create(shared_node, "offs")

    def err(*args: str) -> str:
        return fails("get-offsets", "--bootstrap-server", shared_node.bootstrap, *args)

    assert (
        err("--topic", "nothing-like-this")
        == "seglog get-offsets: UNKNOWN_TOPIC_OR_PARTITION: topic 'nothing-like-this' "
        "does not exist"
    )
    assert "no partition 2" in err("--topic", "offs", "--partitions", "0,2")
    assert "--time 'yesterday'" in err("--topic", "offs", "--time", "yesterday")
    assert "--partitions" in err("--topic", "offs", "--partitions", "one")
    # A regular expression matching whole names.
    r = ok("get-offsets", "--bootstrap-server", shared_node.bootstrap, "--topic", "of+s")
    assert r.stdout == "offs:0:0\n"


def test_alter_partitions_keeps_old_data_and_places_new_keys_by_the_new_count(
    shared_node: NodeProcess,
) -> None:
    from seglog.client.consumer import Consumer, TopicPartition
    from seglog.client.partitioner import murmur2, to_positive
    from seglog.client.producer import Producer

    create(shared_node, "grow", "--partitions", "2", "--replication-factor", "1")
    keys = [f"k{i}".encode() for i in range(20)]
    with Producer(shared_node.bootstrap, acks="all") as p:
        before = {k: p.send("grow", b"old", key=k).get(timeout=30).partition for k in keys}
    assert all(before[k] == to_positive(murmur2(k)) % 2 for k in keys)
    r = ok(*topics(shared_node, "--alter", "--topic", "grow", "--partitions", "4"))
    assert r.stdout.endswith("Adding partitions succeeded!\n")
    assert "WARNING: If partitions are increased" in r.stdout
    described = ok(*topics(shared_node, "--describe", "--topic", "grow")).stdout
    assert "PartitionCount: 4" in described
    assert len(re.findall(r"\tPartition: \d", described)) == 4
    with Producer(shared_node.bootstrap, acks="all") as p:
        after = {k: p.send("grow", b"new", key=k).get(timeout=30).partition for k in keys}
    assert all(after[k] == to_positive(murmur2(k)) % 4 for k in keys)
    assert any(after[k] >= 2 for k in keys)  # the new partitions are in use
    tps = [TopicPartition("grow", i) for i in range(4)]
    with Consumer(bootstrap_servers=shared_node.bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        got: list[bytes] = []
        for _ in range(40):
            for recs in c.poll(timeout_ms=250).values():
                got += [r.value for r in recs]
            if len(got) >= 40:
                break
    assert sorted(got) == sorted([b"old"] * 20 + [b"new"] * 20)
    # Never fewer: Kafka's INVALID_PARTITIONS, named.
    line = fails(*topics(shared_node, "--alter", "--topic", "grow", "--partitions", "3"))
    assert line.startswith("seglog topics: INVALID_PARTITIONS")


def test_describe_filters_on_a_healthy_topic_print_nothing(shared_node: NodeProcess) -> None:
    create(shared_node, "healthy", "--partitions", "2", "--replication-factor", "1")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        r = ok(*topics(shared_node, "--describe", "--topic", "healthy", flag))
        assert r.stdout == ""
    at_min = ok(*topics(shared_node, "--describe", "--topic", "healthy", "--at-min-isr-partitions"))
    assert len(at_min.stdout.splitlines()) == 2  # ISR of 1 == min.insync.replicas 1
    line = fails(
        *topics(
            shared_node,
            "--describe",
            "--under-replicated-partitions",
            "--unavailable-partitions",
        )
    )
    assert "only one of" in line
