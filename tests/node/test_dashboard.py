"""The dashboard page (compose/prometheus/consoles/seglog.html) in headless Chromium:
one real node with its metrics endpoint, Debian's Prometheus scraping it every second
and serving the page as a console, a produce and a group's committed offset behind
the end; then every plot of the rendered page must hold points (the page writes each
plot's count into its DOM), and the consumer lag plot the lag of the known state.

tests/run.sh installs `prometheus` and `chromium`; without them this skips."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from node_process import NodeProcess, free_port
from test_metrics import WAIT_S, metrics_port

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.producer import Producer

ROOT = Path(__file__).resolve().parents[2]
CONSOLES = ROOT / "compose" / "prometheus" / "consoles"
PLOTS = ("urp", "offline", "requests", "latency", "bytes", "lag", "idle")

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("chromium") is None,
    reason="prometheus or chromium is not installed (tests/run.sh installs both)",
)


def prometheus_query(port: int, query: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def wait_for(what: str, probe, timeout_s: float = WAIT_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout_s}s: {what}")


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[NodeProcess, int]]:
    grpc_port, kafka_port = free_port(), free_port()
    node = NodeProcess(
        tmp_path,
        port=grpc_port,
        overrides={
            "listeners": f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}",
            "metrics.port": "0",
            "metrics.host": "127.0.0.1",
        },
    ).start()
    proc = None
    try:
        port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: seglog\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{metrics_port(node)}']\n"
        )
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - the child's
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.console.templates={CONSOLES}",
                "--web.console.libraries=/usr/share/prometheus/console_libraries",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        yield node, port
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        node.stop()


def render(url: str) -> str:
    """The page's DOM once its script ran (Chromium's virtual time waits for its
    fetches)."""
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def figures(dom: str) -> dict[str, tuple[int, int]]:
    """(points, series) of each plot, as the page wrote them."""
    out = {}
    for m in re.finditer(r"<figure ([^>]*)>", dom):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        out[attrs["id"].removeprefix("plot-")] = (
            int(attrs["data-points"]),
            int(attrs["data-series"]),
        )
    return out


def test_the_dashboard_plots_every_query(prometheus: tuple[NodeProcess, int]) -> None:
    node, port = prometheus
    wait_for(
        "Prometheus scraped the node",
        lambda: prometheus_query(port, "kafka_server_replicamanager_partitioncount"),
    )
    with Admin(node.bootstrap) as admin:
        admin.create_topics([NewTopic("dash", 1, 1)])
    with Producer(node.bootstrap, acks="all") as producer:
        # A counter's first sample has no rate: produce, let Prometheus see the
        # series, produce again.
        for _ in range(10):
            producer.send("dash", b"x" * 200, partition=0).get(timeout=WAIT_S)
        wait_for(
            "the topic's bytes in Prometheus",
            lambda: prometheus_query(
                port, 'kafka_server_brokertopicmetrics_bytesin_total{topic="dash"}'
            ),
        )
        for _ in range(10):
            producer.send("dash", b"x" * 200, partition=0).get(timeout=WAIT_S)
    with Admin(node.bootstrap) as admin:
        admin.alter_consumer_group_offsets("billing", {TopicPartition("dash", 0): 5})
    # Rates need two scrapes after the produce; the lag one with the commit.
    wait_for(
        "the lag and a produce rate in Prometheus",
        lambda: (
            prometheus_query(port, 'kafka_consumergroup_lag{group="billing"} == 15')
            and prometheus_query(
                port, "sum(rate(kafka_server_brokertopicmetrics_bytesin_total[1m])) > 0"
            )
        ),
    )
    dom = render(f"http://127.0.0.1:{port}/consoles/seglog.html?range=300")
    assert 'data-state="done"' in dom, dom[-3000:]
    plots = figures(dom)
    assert sorted(plots) == sorted(PLOTS), plots
    for name, (points, series) in plots.items():
        assert points > 0 and series > 0, (name, plots)
    # One group, and its lag's last point is the known lag (20 records, committed 5).
    assert plots["lag"][1] == 1
    assert re.search(r"group=billing: 15<", dom), dom[dom.find('id="plot-lag"') :][:2000]
