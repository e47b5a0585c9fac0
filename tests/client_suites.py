"""Run a Kafka client's own integration suite against real seglog nodes, configured the
way that suite expects (docs/compatibility.md, "The clients' own integration suites").
The sources are not part of this repository: pass the path of a checkout.

    python3 tests/client_suites.py kafka-python --checkout ~/src/kafka-python [-- PYTEST ARGS]
    python3 tests/client_suites.py librdkafka --checkout ~/src/librdkafka [--tests 0001,0081]
    python3 tests/client_suites.py aiokafka --checkout ~/src/aiokafka

- kafka-python (the tag of the pinned kafka-python): `test/integration` with
  KAFKA_VERSION=4.0.0 and KAFKA_URI naming one seglog node whose node.id is 0 (the suite
  assumes a single broker 0), set up as the suite's own broker config
  (servers/resources/default/kafka.properties: group.min.session.timeout.ms=1000, two
  offsets partitions, a static advertised.listeners, an authorizer allowing everyone),
  KAFKA_ROOT an empty directory (the fixture wants one even for an external broker);
  transactions excluded until seglog has them, and the SSL tests, which start a broker
  of their own. The checkout's own `kafka` package is tested (PYTHONPATH), with
  pytest-mock and pytest-timeout installed (its `testing` extra).
- librdkafka (the tag of confluent-kafka's bundled librdkafka, 2.16.0 for
  confluent-kafka 2.16): built in the checkout (`./configure && make`, then
  `make -C tests build`), run by `tests/test-runner` against three seglog nodes with a
  `tests/test.conf` naming them, TEST_KAFKA_VERSION=4.0.0, topics auto-created with 4
  partitions (librdkafka's default trivup scenario). Mock-cluster tests (`_mock`) and
  local-only ones run too. Tests written for another trivup scenario (SASL or SSL
  brokers, `noautocreate`) meet a cluster that is not set up for them; pick tests with
  --tests.
- aiokafka: its functional tests start Kafka in Docker (`--docker-image`) and take no
  external broker, so none of them can run against seglog; the script runs the unit
  tests (those without the `kafka_server` fixture) and says so.

The nodes' data and logs go to a temporary directory that is kept when the suite fails.
The exit code is the suite's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from seglog.harness.kafka_cluster import KafkaCluster
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

HERE = Path(__file__).resolve().parent

KAFKA_VERSION = "4.0.0"  # what seglog's ApiVersions ranges claim (docs/compatibility.md)
SUITE_SETTINGS = {
    "auto.create.topics.enable": "true",
    "num.partitions": "4",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
}


# An authorizer as the suites' brokers have (their ACL tests need one), that lets their
# unauthenticated clients do everything.
ACLS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
}
# kafka-python's servers/resources/default/kafka.properties, where seglog has the config.
KAFKA_PYTHON_SETTINGS = {
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "2",
    "replica.lag.time.max.ms": "1000",
    "log.cleaner.enable": "false",
}


def single_node_zero(
    root: Path, settings: Mapping[str, str] | None = None
) -> tuple[NodeProcess, int]:
    """One node, id 0, a voter of a quorum of one, with a PLAINTEXT Kafka listener that
    is also advertised (a static `advertised.listeners`, as the suites' brokers have)."""
    controller_port, kafka_port = free_port(), free_port()
    node = NodeProcess(
        root,
        node_id=0,
        overrides={
            **SUITE_SETTINGS,
            **(settings or {}),
            "controller.quorum.voters": f"0@127.0.0.1:{controller_port}",
        },
        controller_port=controller_port,
    )
    lines = []
    for line in node.config_path.read_text().splitlines():
        if line.startswith("listeners="):
            line += f",PLAINTEXT://127.0.0.1:{kafka_port}"
            advertised = [x for x in line.split("=", 1)[1].split(",") if "CONTROLLER" not in x]
            lines.append("advertised.listeners=" + ",".join(advertised))
        lines.append(line)
    node.config_path.write_text("\n".join(lines) + "\n")
    return node, kafka_port


def run(command: list[str], cwd: Path, env: Mapping[str, str]) -> int:
    print("+", " ".join(command), f"(in {cwd})", flush=True)
    return subprocess.run(command, cwd=cwd, env={**os.environ, **env}, check=False).returncode


def kafka_python(checkout: Path, root: Path, extra: list[str]) -> int:
    node, port = single_node_zero(root, {**KAFKA_PYTHON_SETTINGS, **ACLS})
    node.start(timeout_s=60)
    # The suite's fixture insists on a Kafka install (KAFKA_ROOT) even for an external
    # broker, and never uses it then: an empty directory stands for it.
    kafka_root = root / "no-kafka-install"
    kafka_root.mkdir(exist_ok=True)
    try:
        env = {
            "KAFKA_VERSION": KAFKA_VERSION,
            "KAFKA_URI": f"PLAINTEXT://127.0.0.1:{port}",
            "KAFKA_ROOT": str(kafka_root),
            "PYTHONPATH": str(checkout),
        }
        print(
            "kafka-python: transactions are excluded (seglog has none yet); "
            "test_ssl_integration.py's TestSSLConnection starts a Kafka broker of its own "
            "(KafkaFixture with transport='SSL', no external-broker path) and cannot run "
            "against any external broker: excluded. test_sasl_integration.py skips "
            "itself on an external broker.",
            flush=True,
        )
        selected = "not transaction and not TestSSLConnection"
        pytest = [sys.executable, "-m", "pytest", "test/integration", "-k", selected]
        return run(pytest + extra, checkout, env)
    finally:
        node.stop()


def librdkafka(checkout: Path, root: Path, tests: str | None) -> int:
    if not (checkout / "tests" / "test-runner").exists():
        for step in (["./configure"], ["make", "-j2"], ["make", "-C", "tests", "build"]):
            code = run(step, checkout, {})
            if code:
                return code
    cluster = KafkaCluster(root, {**SUITE_SETTINGS, "default.replication.factor": "3", **ACLS})
    cluster.start_all()
    try:
        conf = checkout / "tests" / "test.conf"
        conf.write_text(
            f"metadata.broker.list={cluster.kafka_bootstrap}\ntest.timeout.multiplier=3\n"
        )
        env = {
            "TEST_KAFKA_VERSION": KAFKA_VERSION,
            # the test-runner links the checkout's own library, as run-test.sh sets it up
            "LD_LIBRARY_PATH": f"{checkout / 'src'}:{checkout / 'src-cpp'}",
            **({"TESTS": tests} if tests else {}),
        }
        return run(["./test-runner", "-p1"], checkout / "tests", env)
    finally:
        cluster.stop_all()


def aiokafka(checkout: Path) -> int:
    print(
        "aiokafka's functional tests start Kafka in Docker (--docker-image) and cannot "
        "take an external broker: none run against seglog. Running its unit tests.",
        flush=True,
    )
    # Without --docker-image every test needing a broker skips itself.
    return run([sys.executable, "-m", "pytest", "tests", "-q"], checkout, {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", choices=("kafka-python", "librdkafka", "aiokafka"))
    parser.add_argument("--checkout", type=Path, required=True, help="the client's sources")
    parser.add_argument("--tests", help="librdkafka: TESTS, e.g. 0001,0081")
    argv = sys.argv[1:] if argv is None else argv
    # kafka-python: what follows `--` goes to pytest (argparse would take a positional
    # list right after the suite's name, before --checkout).
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.pytest_args = argv[cut + 1 :]
    checkout = args.checkout.expanduser().resolve()
    if not checkout.is_dir():
        parser.error(f"--checkout {checkout} is not a directory")
    root = Path(tempfile.mkdtemp(prefix=f"seglog-{args.suite}-"))
    if args.suite == "kafka-python":
        code = kafka_python(checkout, root, args.pytest_args)
    elif args.suite == "librdkafka":
        code = librdkafka(checkout, root, args.tests)
    else:
        code = aiokafka(checkout)
    if code == 0:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"the suite failed (exit {code}); the nodes' data and logs are in {root}")
    return code


if __name__ == "__main__":
    sys.exit(main())
