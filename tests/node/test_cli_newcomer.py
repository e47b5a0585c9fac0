"""What a newcomer's first commands run into (issue 36's smaller list), against one
real node: `seglog --version`, `from seglog import Producer, Consumer, Admin`, the
subcommand's usage on a mistyped flag, `--help` without loading the clients or the
storage engine, `dump-log ... | head` ending quietly, kafka-topics' checks of
--partitions, `configs --entity-type topics` as kafka-configs, and producing to a
missing topic saying that it was created."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.harness.node_process import NodeProcess


def seglog(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    n = NodeProcess(
        tmp_path_factory.mktemp("newcomer"),
        overrides={"num.partitions": "2", "auto.create.topics.enable": "true"},
    ).start()
    try:
        yield n
    finally:
        n.stop()


def test_version_and_the_top_level_package(tmp_path: Path) -> None:
    r = seglog("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"seglog {version('seglog')}", r
    # A fresh interpreter outside the repository: the installed package only.
    code = (
        "import sys\n"
        "from seglog import Producer, Consumer, Admin, __version__\n"
        "from seglog.client import Producer as P, Consumer as C, Admin as A\n"
        "assert (P, C, A) == (Producer, Consumer, Admin)\n"
        "import seglog.storage.log\n"
        "print(__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == version("seglog")


def test_help_loads_neither_clients_nor_storage() -> None:
    """What makes `seglog --help` and a typo answer at once (0.5 s before: grpc, numpy,
    the storage engine and the group coordinator were imported to build the parser)."""
    code = (
        "import sys\n"
        "from seglog.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = [m for m in ('grpc', 'numpy', 'seglog.client.admin', 'seglog.storage.log',"
        " 'seglog.node.groups.group_coordinator') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"building the parser imported {done.stdout.strip()}"


def test_a_mistyped_flag_shows_the_subcommands_usage() -> None:
    r = seglog("topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--topics", "demo")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: seglog topics "), r.stderr
    assert "seglog topics: error: unrecognized arguments: --topics demo" in r.stderr


def test_dump_log_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    assert seglog("demo", "--data-dir", str(tmp_path / "demo"), "--records", "2000").returncode == 0
    segment = tmp_path / "demo" / "demo-0" / "00000000000000000000.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog.cli",
            "dump-log",
            "--files",
            str(segment),
            "--print-data-log",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # as `| head -1`: one line, then the reader is gone
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err  # as a Unix tool killed by SIGPIPE
    assert err == ""


def test_partitions_must_be_positive(node: NodeProcess) -> None:
    for bad in ("-1", "0"):
        r = seglog(
            "topics",
            "--bootstrap-server",
            node.bootstrap,
            "--create",
            "--topic",
            f"p{bad}",
            "--partitions",
            bad,
        )
        assert r.returncode == 1
        assert r.stderr.strip() == (
            "seglog topics: INVALID_PARTITIONS: The partitions must be greater than 0"
        )
    with Admin(node.bootstrap) as admin:
        assert not {"p-1", "p0"} & set(admin.list_topics())


def test_configs_for_topics_as_kafka_configs(node: NodeProcess) -> None:
    with Admin(node.bootstrap) as admin:
        admin.create_topics([NewTopic("configured", 1, 1)])
    base = ["configs", "--bootstrap-server", node.bootstrap, "--entity-type", "topics"]
    r = seglog(
        *base,
        "--alter",
        "--entity-name",
        "configured",
        "--add-config",
        "retention.ms=86400000,cleanup.policy=compact",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for topic configured."
    r = seglog(*base, "--describe", "--entity-name", "configured")
    assert r.returncode == 0, r.stderr
    source = "synonyms={DYNAMIC_TOPIC_CONFIG"
    assert r.stdout.splitlines() == [
        "Dynamic configs for topic configured are:",
        f"  cleanup.policy=compact sensitive=false {source}:cleanup.policy=compact}}",
        f"  retention.ms=86400000 sensitive=false {source}:retention.ms=86400000}}",
    ]
    r = seglog(*base, "--alter", "--entity-name", "configured", "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stderr
    r = seglog(*base, "--describe", "--entity-name", "configured", "--all")
    assert "All configs for topic configured are:" in r.stdout
    assert "  retention.ms=604800000 " in r.stdout  # back to the default
    assert "  cleanup.policy=compact sensitive=false" in r.stdout


def test_producing_to_a_missing_topic_says_it_was_created(node: NodeProcess) -> None:
    r = seglog("produce", "--bootstrap-server", node.bootstrap, "--topic", "fresh", stdin="a\nb\n")
    assert r.returncode == 0, r.stderr
    assert (
        "seglog produce: topic 'fresh' did not exist; the cluster created it "
        "(auto.create.topics.enable) with 2 partitions and replication factor 1"
    ) in r.stderr
    again = seglog("produce", "--bootstrap-server", node.bootstrap, "--topic", "fresh", stdin="c\n")
    assert again.returncode == 0 and "did not exist" not in again.stderr


def test_local_help_explains_the_options_and_the_ports() -> None:
    r = seglog("local", "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for option in ("--nodes", "--data-dir", "--base-port", "--detach"):
        assert option in text
    assert "{up,status,down}" in text
    assert "relative to the current directory" in text
    for line in (
        "PLAINTEXT 127.0.0.1:9092-9094",
        "GRPC 127.0.0.1:9192-9194",
        "CONTROLLER 127.0.0.1:9292-9294",
        "METRICS 127.0.0.1:9392-9394",
    ):
        assert line in text, line
