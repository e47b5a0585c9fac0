"""The page-visits job on a real Spark standalone cluster: a master and two workers
started with PySpark's own `spark-class`, the job shipped with `spark-submit`, all on
loopback. The windows it writes back to seglog are the ones the events make."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

import pyspark
from page_visits_check import closed_window_counts, written_window_counts

from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.pipeline.examples import generate_page_visits, page_visits

SPARK_BIN = Path(pyspark.__file__).parent / "bin"


def spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_BIN.parent),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp / "logs"),
        SPARK_WORKER_DIR=str(tmp / "work"),
        # Executors' Python workers run this interpreter: the seglog under test.
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what} exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not listen on {port} within {timeout_s}s")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Path]]]:
    """spark://127.0.0.1:<port> of a master with two workers (one core each), and the
    workers' work directories."""
    tmp = tmp_path_factory.mktemp("spark")
    env = spark_env(tmp)
    port = free_port()
    procs: list[subprocess.Popen] = []
    java_opts = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

    def launch(name: str, *args: str) -> subprocess.Popen:
        log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - the child's output
        proc = subprocess.Popen(
            [str(SPARK_BIN / "spark-class"), *args],
            env={**env, "SPARK_DAEMON_JAVA_OPTS": java_opts, "SPARK_DAEMON_MEMORY": "256m"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc

    try:
        master = launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()),
        )  # fmt: skip
        wait_for_port(port, master, "the Spark master")
        url = f"spark://127.0.0.1:{port}"
        for i in (1, 2):
            launch(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host", "127.0.0.1", "--cores", "1", "--memory", "768m",
                "--webui-port", str(free_port()), "--work-dir", str(tmp / f"work{i}"),
            )  # fmt: skip
        yield url, [tmp / "work1", tmp / "work2"]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    n = NodeProcess(tmp_path_factory.mktemp("node"))
    n.start()
    try:
        yield n
    finally:
        n.stop()


@pytest.mark.long
def test_page_visits_job_via_spark_submit(standalone, node, tmp_path) -> None:
    master, work_dirs = standalone
    bootstrap = node.bootstrap
    generate_page_visits.ensure_topic(bootstrap, "page_visits")
    end_ms = (int(time.time()) // 60) * 60_000
    events = generate_page_visits.make_events(400, 5, seed=11, end_ms=end_ms)
    generate_page_visits.produce(bootstrap, "page_visits", events)

    submit = subprocess.run(
        [
            str(SPARK_BIN / "spark-submit"),
            "--master",
            master,
            "--total-executor-cores",
            "2",
            "--executor-cores",
            "1",
            "--executor-memory",
            "512m",
            "--driver-memory",
            "512m",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "--conf",
            "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            page_visits.__file__,
            "--bootstrap-server",
            bootstrap,
            "--available-now",
            "--checkpoint",
            str(tmp_path / "checkpoint"),
        ],  # fmt: skip
        env=spark_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-6000:]
    # The application ran on the cluster: each worker started an executor for it.
    for work in work_dirs:
        assert list(work.glob("app-*/*/stderr")), f"no executor ran in {work}"

    closed = closed_window_counts(events)
    got = written_window_counts(bootstrap, 30)
    assert closed and got == closed
