"""The dashboard page (compose/prometheus/consoles/seglog.html) in headless Chromium:
one real node with its metrics endpoint, Debian's Prometheus scraping it every second
and serving the page as a console, a produce and a group's committed offset behind
the end; then every plot of the rendered page must hold points (the page writes each
plot's count into its DOM), and the consumer lag plot the lag of the known state.

tests/run.sh installs `prometheus` and `chromium`; without them this skips."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_page import CONSOLES, PLOTS, figures, prometheus_query, render, wait_for
from test_metrics import WAIT_S, metrics_node, metrics_port

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("chromium") is None,
    reason="prometheus or chromium is not installed (tests/run.sh installs both)",
)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[NodeProcess, int]]:
    node, _kafka_port = metrics_node(tmp_path)
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
                "--web.console.libraries=/etc/prometheus/console_libraries",
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
