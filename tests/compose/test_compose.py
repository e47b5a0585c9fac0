"""The compose cluster end to end: build the image with compose/build-image.sh,
bring up compose/docker-compose.yml under a unique project name on free loopback
ports, wait until every node's gRPC health check passes, then drive it from the
host with the `seglog` command line (topics, produce, consume), stop one node
with SIGTERM, start it again and read everything back.

Skips, saying why, when docker or docker-compose is missing or the engine does not
answer, or when SEGLOG_SKIP_COMPOSE=1. Every wait is bounded and the project is
always taken down with its volumes (`down -v`). The first run on a machine without
a registry also builds the seglog-base:bookworm base image (a few minutes, once).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from seglog.chaos.compose_target import (
    BUILD_SCRIPT,
    COMPOSE_FILE,
    ROOT,
    compose_down,
    docker_unavailable,
)
from seglog.harness.ports import free_ports

SERVICES = ("node1", "node2", "node3")

BUILD_TIMEOUT_S = 1200.0  # includes a first-time debootstrap of the base image
HEALTHY_TIMEOUT_S = 120.0
CLI_TIMEOUT_S = 60.0
RECORDS = 30


# Why this test cannot run here, or None.
_UNAVAILABLE = (
    "SEGLOG_SKIP_COMPOSE=1"
    if os.environ.get("SEGLOG_SKIP_COMPOSE") == "1"
    else docker_unavailable()
)
pytestmark = [
    pytest.mark.skipif(_UNAVAILABLE is not None, reason=f"compose test: {_UNAVAILABLE}"),
    pytest.mark.timeout(BUILD_TIMEOUT_S + 600),
]


def _run(
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(env) if env is not None else None,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(argv)} did not finish within {timeout_s:.0f}s") from e
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
        )
    return result


def _wait_for(what: str, timeout_s: float, probe: Callable[[], str | None]) -> None:
    """Call probe until it returns None (done); otherwise it returns why not yet."""
    deadline = time.monotonic() + timeout_s
    last = "never probed"
    while time.monotonic() < deadline:
        why = probe()
        if why is None:
            return
        last = why
        time.sleep(1.0)
    raise AssertionError(f"{what}: not done within {timeout_s:.0f}s (last: {last})")


@dataclass
class Cluster:
    project: str
    ports: list[int]
    env: dict[str, str]

    def compose(
        self, *args: str, timeout_s: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        return _run(argv, timeout_s, env=self.env, check=check)

    def container(self, service: str) -> str:
        cid = self.compose("ps", "-q", service, timeout_s=30).stdout.strip()
        assert cid, f"no container for {service}"
        return cid

    def state(self, service: str) -> tuple[str, str, int]:
        """(status, health, exit code) of a service's container."""
        out = _run(
            [
                "docker",
                "inspect",
                "-f",
                "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}"
                "{{else}}none{{end}} {{.State.ExitCode}}",
                self.container(service),
            ],
            30,
        ).stdout.split()
        return out[0], out[1], int(out[2])

    def wait_healthy(self, services: Sequence[str] = SERVICES) -> None:
        def probe() -> str | None:
            states = {s: self.state(s) for s in services}
            for service, (status, _health, code) in states.items():
                if status in ("exited", "dead"):
                    raise AssertionError(f"{service} exited with {code}:\n{self.logs(service)}")
            pending = [f"{s}={h}" for s, (_st, h, _c) in states.items() if h != "healthy"]
            return ", ".join(pending) or None

        _wait_for("compose nodes healthy", HEALTHY_TIMEOUT_S, probe)

    def logs(self, *services: str) -> str:
        result = self.compose("logs", "--no-color", "--tail", "40", *services, check=False)
        return result.stdout[-6000:]

    def bootstrap(self, *nodes: int) -> str:
        picked = nodes or (1, 2, 3)
        return ",".join(f"127.0.0.1:{self.ports[n - 1]}" for n in picked)


def seglog(
    *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The `seglog` command line on the host, as a user would run it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return _run(
        [sys.executable, "-m", "seglog.cli", *args],
        CLI_TIMEOUT_S,
        env=env,
        stdin=stdin,
        check=check,
    )


@contextmanager
def compose_cluster() -> Iterator[Cluster]:
    both = free_ports(6)  # gRPC, then the Kafka-protocol listeners (published too)
    ports, kafka_ports = both[:3], both[3:]
    project = f"seglog-test-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "SEGLOG_PORT_1": str(ports[0]),
        "SEGLOG_PORT_2": str(ports[1]),
        "SEGLOG_PORT_3": str(ports[2]),
        **{f"SEGLOG_KAFKA_PORT_{n}": str(p) for n, p in enumerate(kafka_ports, 1)},
    }
    cluster = Cluster(project, ports, env)
    try:
        cluster.compose("up", "-d", "--no-build", timeout_s=180)
        yield cluster
    except BaseException as e:
        # Give a failure the nodes' last words before everything is removed.
        if isinstance(e, AssertionError):
            e.args = (f"{e.args[0] if e.args else ''}\n--- compose logs\n{cluster.logs()}",)
        raise
    finally:
        compose_down(project, env)  # with its volumes; quiet if already gone


def _consume_all(bootstrap: str, topic: str, count: int, check: bool = True) -> list[str]:
    """Up to `count` records from the beginning (fewer if none arrive for 20 s)."""
    result = seglog(
        "consume",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "20000",
        check=check,
    )
    return result.stdout.splitlines()


@pytest.mark.long
def test_compose_cluster_serves_the_cli_and_keeps_data_across_a_restart() -> None:
    started = time.monotonic()
    build = _run(["bash", str(BUILD_SCRIPT)], BUILD_TIMEOUT_S)
    timings = {"build": time.monotonic() - started}
    print(build.stderr[-2000:])

    with compose_cluster() as cluster:
        up = time.monotonic()
        cluster.wait_healthy()
        timings["up_to_healthy"] = time.monotonic() - up

        # Create through node1; until the controller quorum has elected a leader
        # the request may fail, so retry within a bound.
        def create() -> str | None:
            r = seglog(
                "topics",
                "--bootstrap-server",
                cluster.bootstrap(1),
                "--create",
                "--topic",
                "demo",
                "--partitions",
                "3",
                "--request-timeout-ms",
                "10000",
                check=False,
            )
            if r.returncode == 0 or "TOPIC_ALREADY_EXISTS" in r.stderr:
                return None
            return r.stderr.strip()[-300:]

        _wait_for("topic demo created", 90, create)

        # One cluster: node3 knows the topic node1 created, with all 3 partitions led.
        def described() -> str | None:
            r = seglog(
                "topics",
                "--bootstrap-server",
                cluster.bootstrap(3),
                "--describe",
                "--topic",
                "demo",
                check=False,
            )
            led = [ln for ln in r.stdout.splitlines() if "Partition:" in ln and "Leader:" in ln]
            if r.returncode == 0 and len(led) == 3 and "Leader: -1" not in r.stdout:
                return None
            return (r.stdout + r.stderr).strip()[-300:]

        _wait_for("topic demo visible from node3", 60, described)

        lines = [f"record-{i}" for i in range(RECORDS)]
        seglog(
            "produce",
            "--bootstrap-server",
            cluster.bootstrap(),
            "--topic",
            "demo",
            stdin="\n".join(lines) + "\n",
        )
        assert sorted(_consume_all(cluster.bootstrap(), "demo", RECORDS)) == sorted(lines)

        # SIGTERM: the node shuts down cleanly (exit 0) and keeps its data in its volume.
        restart = time.monotonic()
        victim = cluster.container("node1")
        _run(["docker", "kill", "-s", "TERM", victim], 30)

        def stopped() -> str | None:
            status, _health, _code = cluster.state("node1")
            return None if status == "exited" else status

        _wait_for("node1 stopped after SIGTERM", 60, stopped)
        assert cluster.state("node1")[2] == 0, f"unclean exit:\n{cluster.logs('node1')}"
        cluster.compose("start", "node1", timeout_s=60)
        cluster.wait_healthy()
        timings["term_restart_to_healthy"] = time.monotonic() - restart

        def all_back() -> str | None:
            got = sorted(_consume_all(cluster.bootstrap(), "demo", RECORDS, check=False))
            return None if got == sorted(lines) else f"read {len(got)} of {RECORDS} records"

        _wait_for("every record readable after node1's restart", 90, all_back)

    timings["total"] = time.monotonic() - started
    print("compose test timings (s): " + ", ".join(f"{k}={v:.1f}" for k, v in timings.items()))
