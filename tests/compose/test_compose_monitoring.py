"""The compose cluster with its Prometheus (compose/docker-compose.monitoring.yml): build
both images (compose/build-image.sh --prometheus), bring the three nodes and Prometheus
up under a unique project name on free loopback ports, produce and commit a group's
offset behind the end from the host, wait until Prometheus has scraped all three nodes
and sees the lag, then render the dashboard Prometheus serves in headless Chromium:
every plot holds points and the lag plot shows the known lag.

Long (an image build, then a cluster): SEGLOG_LONG_TESTS=1. Skips, saying why, when
docker, docker-compose, chromium or Debian's package index is missing, or when
SEGLOG_SKIP_COMPOSE=1. The project is always taken down with its volumes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dashboard_page import PLOTS, figures, prometheus_query, render, wait_for

from seglog.chaos.compose_target import BUILD_SCRIPT, COMPOSE_FILE, ROOT, docker_unavailable
from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.producer import Producer
from seglog.harness.ports import free_ports

MONITORING_FILE = ROOT / "compose" / "docker-compose.monitoring.yml"
BUILD_TIMEOUT_S = 1500.0  # a first-time debootstrap of the base image included
UP_TIMEOUT_S = 180.0
# Tags of this test's own (other runs building seglog:latest at the same time on a
# shared engine must not swap the image under it).
IMAGES = {
    "SEGLOG_IMAGE": "seglog:monitoring-test",
    "SEGLOG_PROMETHEUS_IMAGE": "seglog-prometheus:monitoring-test",
}
SCRAPED_TIMEOUT_S = 120.0


def _unavailable() -> str | None:
    if os.environ.get("SEGLOG_SKIP_COMPOSE") == "1":
        return "SEGLOG_SKIP_COMPOSE=1"
    if shutil.which("chromium") is None:
        return "chromium is not installed (tests/run.sh installs it)"
    if shutil.which("apt-get") is None:
        return "no apt-get to download Debian's prometheus package with"
    return docker_unavailable()


_UNAVAILABLE = _unavailable()
pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(_UNAVAILABLE is not None, reason=f"monitoring test: {_UNAVAILABLE}"),
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
]


def run(argv: list[str], timeout_s: float, env: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(argv)} did not finish within {timeout_s:.0f}s") from e
    assert done.returncode == 0, (
        f"{' '.join(argv)} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )
    return done.stdout


@contextmanager
def monitored_cluster() -> Iterator[tuple[dict[str, str], list[int], int]]:
    ports = free_ports(7)  # gRPC x3, Kafka x3, Prometheus
    grpc_ports, kafka_ports, prometheus_port = ports[:3], ports[3:6], ports[6]
    project = f"seglog-mon-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        **IMAGES,
        **{f"SEGLOG_PORT_{n}": str(p) for n, p in enumerate(grpc_ports, 1)},
        **{f"SEGLOG_KAFKA_PORT_{n}": str(p) for n, p in enumerate(kafka_ports, 1)},
        "SEGLOG_PROMETHEUS_PORT": str(prometheus_port),
    }
    compose = [
        "docker-compose",
        "-p",
        project,
        "-f",
        str(COMPOSE_FILE),
        "-f",
        str(MONITORING_FILE),
    ]
    try:
        run([*compose, "up", "-d", "--no-build"], UP_TIMEOUT_S, env)
        yield env, grpc_ports, prometheus_port
    except AssertionError as e:
        logs = subprocess.run(
            [*compose, "logs", "--no-color", "--tail", "30"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        ).stdout
        e.args = (f"{e.args[0] if e.args else ''}\n--- compose logs\n{logs[-6000:]}",)
        raise
    finally:
        subprocess.run(
            [*compose, "down", "-v", "--remove-orphans"],
            capture_output=True,
            timeout=180,
            env=env,
        )


def test_prometheus_scrapes_the_cluster_and_the_dashboard_plots_it() -> None:
    run(["bash", str(BUILD_SCRIPT), "--prometheus"], BUILD_TIMEOUT_S, {**os.environ, **IMAGES})
    with monitored_cluster() as (_env, grpc_ports, prometheus_port):
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in grpc_ports)
        wait_for(
            "Prometheus scraping three nodes",
            lambda: len(prometheus_query(prometheus_port, 'up{job="seglog"} == 1')) == 3,
            SCRAPED_TIMEOUT_S,
        )
        wait_for(
            "a topic created",
            lambda: _create(bootstrap),
            SCRAPED_TIMEOUT_S,
        )
        with Producer(bootstrap, acks="all") as producer:
            for _ in range(10):
                producer.send("mon", b"x" * 200, partition=0).get(timeout=60)
            # A counter's first sample has no rate: let Prometheus see it, then more.
            wait_for(
                "the topic's bytes in Prometheus",
                lambda: prometheus_query(
                    prometheus_port, 'kafka_server_brokertopicmetrics_bytesin_total{topic="mon"}'
                ),
                SCRAPED_TIMEOUT_S,
            )
            for _ in range(10):
                producer.send("mon", b"x" * 200, partition=0).get(timeout=60)
        with Admin(bootstrap) as admin:
            admin.alter_consumer_group_offsets("billing", {TopicPartition("mon", 0): 5})
        wait_for(
            "the lag and the produce rate in Prometheus",
            lambda: (
                prometheus_query(
                    prometheus_port, 'sum(kafka_consumergroup_lag{group="billing"}) == 15'
                )
                and prometheus_query(
                    prometheus_port,
                    "sum(rate(kafka_server_brokertopicmetrics_bytesin_total[1m])) > 0",
                )
            ),
            SCRAPED_TIMEOUT_S,
        )
        dom = render(f"http://127.0.0.1:{prometheus_port}/consoles/seglog.html?range=600")
        assert 'data-state="done"' in dom, dom[-3000:]
        plots = figures(dom)
        assert sorted(plots) == sorted(PLOTS), plots
        for name, (points, series) in plots.items():
            assert points > 0 and series > 0, (name, plots)
        assert re.search(r"group=billing: 15<", dom), dom[dom.find('id="plot-lag"') :][:2000]


def _create(bootstrap: str) -> bool:
    try:
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("mon", 1, 3)])
        return True
    except Exception as e:  # noqa: BLE001 - retried until the cluster answers
        return "already exists" in str(e).lower() or "TOPIC_ALREADY_EXISTS" in str(e)
