"""kcat (librdkafka 2.0.2, Debian's) against three real nodes: -L, produce and consume
with each compression codec (the stored batches really are compressed: checked with
`seglog dump-log`), and -Q offsets by time."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")

CODECS = ("gzip", "snappy", "lz4", "zstd")


def kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> str:
    done = subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"kcat {args} failed: {done.stderr}"
    return done.stdout


def test_kcat_lists_brokers_and_topics(kafka_cluster):
    out = kcat("-b", kafka_cluster.kafka_bootstrap, "-L")
    for i, port in kafka_cluster.kafka_ports.items():
        assert f"broker {i} at 127.0.0.1:{port}" in out, out
    assert "3 brokers" in out


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_and_consumes_compressed(kafka_cluster, codec):
    topic = f"kcat-{codec}"
    lines = [f"{codec}-{i:05d}-" + "x" * 100 for i in range(300)]
    b = kafka_cluster.kafka_bootstrap
    kcat("-b", b, "-P", "-t", topic, "-z", codec, "-X", "linger.ms=50", stdin="\n".join(lines))
    out = kcat("-b", b, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert out.splitlines() == lines
    # Every replica stores what the producer sent: compressed batches.
    leader = kafka_cluster.leader_of(topic)
    assert leader is not None
    logs = [p for d in kafka_cluster.nodes[leader].log_dirs for p in d.glob(f"{topic}-0/*.log")]
    assert logs, f"no segment of {topic} on node {leader}"
    dump = subprocess.run(
        [sys.executable, "-m", "seglog.cli", "dump-log", "--files", str(logs[0])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dump.returncode == 0, dump.stderr
    codecs = re.findall(r"compresscodec: (\w+)", dump.stdout)
    assert codecs and all(c == codec for c in codecs), (codec, codecs)
    counts = [int(c) for c in re.findall(r" count: (\d+)", dump.stdout)]
    assert sum(counts) == len(lines)


def test_kcat_offsets_by_time(kafka_cluster):
    topic = "kcat-times"
    b = kafka_cluster.kafka_bootstrap
    kcat("-b", b, "-P", "-t", topic, stdin="\n".join(f"early-{i}" for i in range(10)))
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    kcat("-b", b, "-P", "-t", topic, stdin="\n".join(f"late-{i}" for i in range(5)))

    def offset_at(ts: int) -> int:
        out = kcat("-b", b, "-Q", "-t", f"{topic}:0:{ts}")
        m = re.search(rf"{topic} \[0\] offset (-?\d+)", out)
        assert m, out
        return int(m.group(1))

    assert offset_at(middle) == 10  # the first record at or after the time
    assert offset_at(-2) == 0  # earliest
    assert offset_at(-1) == 15  # latest
    assert offset_at(middle + 3_600_000) == -1  # nothing that late
