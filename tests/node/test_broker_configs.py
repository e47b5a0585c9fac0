"""Dynamic broker configs (KIP-226) on a real node, through `seglog configs
--entity-type brokers`: a change is stored in the metadata log, takes effect without a
restart (a topic's effective retention.ms follows the new cluster-wide default; the
node applies a new replication throttle rate; the log cleaner restarts with a new
number of threads) and is still there after one; a config
that needs a restart, or a bad value, is refused naming it."""

from __future__ import annotations

import json

import pytest

from seglog.cli.main import main as seglog_main
from seglog.client.admin import Admin, NewTopic
from seglog.harness.node_process import NodeProcess


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = seglog_main(["configs", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def applied_rates(node: NodeProcess) -> list[dict[str, str]]:
    out = []
    for line in node.log_path.read_text(errors="replace").splitlines():
        if '"event":"broker_configs_applied"' in line:
            out.append(json.loads(line)["dynamic"])
    return out


def test_broker_configs_change_without_restart(
    node: NodeProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ("--bootstrap-server", node.bootstrap, "--entity-type", "brokers")
    with Admin(node.bootstrap, request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("dyn", 1, 1)])
        assert admin.describe_configs("dyn")["retention.ms"].value == "604800000"

        code, out, err = run_cli(
            capsys, "--alter", *common, "--entity-default", "--add-config", "log.retention.ms=12345"
        )
        assert code == 0, err
        assert "Completed updating default config for brokers in the cluster." in out
        entry = admin.describe_configs("dyn")["retention.ms"]
        assert entry.value == "12345"

        code, out, err = run_cli(
            capsys,
            "--alter",
            *common,
            "--entity-name",
            "1",
            "--add-config",
            "leader.replication.throttled.rate=4096,follower.replication.throttled.rate=8192",
        )
        assert code == 0 and "Completed updating config for broker 1." in out, err
        assert applied_rates(node)[-1] == {
            "log.retention.ms": "12345",
            "leader.replication.throttled.rate": "4096",
            "follower.replication.throttled.rate": "8192",
        }
        code, out, _ = run_cli(capsys, "--describe", *common, "--entity-name", "1")
        assert code == 0
        assert out.splitlines() == [
            "Dynamic configs for broker 1 are:",
            "  follower.replication.throttled.rate=8192 sensitive=false "
            "synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=8192}",
            "  leader.replication.throttled.rate=4096 sensitive=false "
            "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=4096}",
        ]

        # Refused, naming what is wrong; nothing changes.
        code, _, err = run_cli(
            capsys, "--alter", *common, "--entity-default", "--add-config", "num.io.threads=2"
        )
        assert code == 1 and "num.io.threads cannot be changed without a restart" in err
        code, _, err = run_cli(
            capsys,
            "--alter",
            *common,
            "--entity-name",
            "1",
            "--add-config",
            "leader.replication.throttled.rate=0",
        )
        assert code == 1 and "Value must be at least 1" in err

        # Deleting falls back to the static/default value, at once.
        code, _, err = run_cli(
            capsys,
            "--alter",
            *common,
            "--entity-name",
            "1",
            "--delete-config",
            "leader.replication.throttled.rate",
        )
        assert code == 0, err
        assert "leader.replication.throttled.rate" not in applied_rates(node)[-1]

        # The log cleaner restarts with the new number of threads.
        code, _, err = run_cli(
            capsys, "--alter", *common, "--entity-default", "--add-config", "log.cleaner.threads=2"
        )
        assert code == 0, err
        changed = [
            json.loads(line)
            for line in node.log_path.read_text(errors="replace").splitlines()
            if '"event":"cleaner_threads_changed"' in line
        ]
        assert [e["threads"] for e in changed] == [2]

    node.stop()
    node.start(timeout_s=90)
    with Admin(node.bootstrap, request_timeout_ms=20_000) as admin:
        assert admin.describe_configs("dyn")["retention.ms"].value == "12345"
    code, out, _ = run_cli(capsys, "--describe", *common, "--entity-default")
    assert code == 0
    assert out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.threads=2 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}",
        "  log.retention.ms=12345 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=12345}",
    ]
