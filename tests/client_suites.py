"""Run a Kafka client's own integration suite against real seglog nodes, configured the
way that suite expects (docs/compatibility.md, "The clients' own integration suites").
The sources are not part of this repository: pass the path of a checkout.

    python3 tests/client_suites.py kafka-python --checkout ~/src/kafka-python [-- PYTEST ARGS]
    python3 tests/client_suites.py librdkafka --checkout ~/src/librdkafka [--tests 0001,0081]
        [--subtests NAME] [--quick] [--scenario noautocreate] [--local] [--timeout S]
    python3 tests/client_suites.py aiokafka --checkout ~/src/aiokafka

- kafka-python (the tag of the pinned kafka-python): `test/integration` with
  KAFKA_VERSION=4.0.0 and KAFKA_URI naming one seglog node whose node.id is 0 (the suite
  assumes a single broker 0), set up as the suite's own broker config
  (servers/resources/default/kafka.properties: group.min.session.timeout.ms=1000, two
  offsets partitions, a static advertised.listeners, an authorizer allowing everyone),
  KAFKA_ROOT an empty directory (the fixture wants one even for an external broker);
  the SSL tests, which start a broker of their own, excluded. The checkout's own `kafka`
  package is tested (PYTHONPATH), with pytest-mock and pytest-timeout installed (its
  `testing` extra).
- librdkafka (the tag of confluent-kafka's bundled librdkafka): a checkout already built
  with its tests (its `tests/test-runner`; the script builds nothing), run by that
  test-runner against three seglog nodes set up as librdkafka's trivup scenarios
  (tests/scenarios/*.json: 4 partitions, replication factor 3, topics auto-created
  except with `--scenario noautocreate`; an authorizer without super users, Kafka's
  default group.initial.rebalance.delay.ms), a `tests/test.conf` naming them and
  TEST_KAFKA_VERSION=4.0.0; `-L` leaves out the local tests, which `--local` runs alone
  (`-l`, no nodes). `--quick` is the test-runner's `-Q`; `--timeout` bounds the run.
- aiokafka: its functional tests start Kafka in Docker (`--docker-image`) and take no
  external broker, so none of them can run against seglog; the script runs the unit
  tests (those without the `kafka_server` fixture) and says so.

The nodes' data and logs go to a temporary directory that is kept when the suite fails.
The exit code is the suite's (124 when --timeout stopped it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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
            "kafka-python: test_ssl_integration.py's TestSSLConnection starts a Kafka "
            "broker of its own (KafkaFixture with transport='SSL', no external-broker "
            "path) and cannot run against any external broker: excluded. "
            "test_sasl_integration.py skips "
            "itself on an external broker.",
            flush=True,
        )
        selected = "not TestSSLConnection"
        pytest = [sys.executable, "-m", "pytest", "test/integration", "-k", selected]
        return run(pytest + extra, checkout, env)
    finally:
        node.stop()


def librdkafka(checkout: Path, root: Path, args: argparse.Namespace) -> int:
    tests_dir = checkout / "tests"
    if not (tests_dir / "test-runner").exists():
        print(
            f"{tests_dir / 'test-runner'} is missing: build the checkout and its tests as "
            "its own README.md and tests/README.md say, then run this again",
            file=sys.stderr,
        )
        return 2
    flags = ["-p1"]
    if args.quick:
        flags.append("-Q")
    env = {
        "TEST_KAFKA_VERSION": KAFKA_VERSION,
        # the test-runner links the checkout's own library, as run-test.sh sets it up
        "LD_LIBRARY_PATH": f"{checkout / 'src'}:{checkout / 'src-cpp'}",
        **({"TESTS": args.tests} if args.tests else {}),
    }
    subtests = args.subtests.split(",") if args.subtests else [""]
    if args.local:
        # -l: only the tests flagged TEST_F_LOCAL (no broker; mock clusters), no nodes.
        (tests_dir / "test.conf").write_text("test.timeout.multiplier=3\n")
        local = ["./test-runner", "-l", *flags]
        return run_bounded(local, tests_dir, {**env, "SUBTESTS": subtests[0]}, args.timeout)
    # librdkafka's trivup scenarios (tests/scenarios/*.json): 3 brokers, 4 partitions,
    # replication factor 3, topics auto-created except in `noautocreate`.
    autocreate = "false" if args.scenario == "noautocreate" else "true"
    cluster = KafkaCluster(
        root,
        {
            **SUITE_SETTINGS,
            "auto.create.topics.enable": autocreate,
            "default.replication.factor": "3",
            # Kafka's default: 0089's two consumers join one first generation (with 0
            # the first one is assigned alone, then the partition moves on a rebalance).
            "group.initial.rebalance.delay.ms": "3000",
            # No super user: 0109, 0115 and 0119 deny `User:*` (the clients' ANONYMOUS)
            # topics with kafka-acls.sh and expect the denials to hold.
            **{k: v for k, v in ACLS.items() if k != "super.users"},
        },
    )
    # A shared, loaded machine can take more than the harness's 30 s to start a node.
    cluster.start_timeout_s = 180.0
    try:
        cluster.start_all()
        (tests_dir / "test.conf").write_text(
            f"metadata.broker.list={cluster.kafka_bootstrap}\ntest.timeout.multiplier=3\n"
        )
        # Some tests run Kafka's own tools from $KAFKA_PATH/bin with BROKERS (trivup's
        # Kafka install): seglog's tools of the same names and flags stand in for them.
        tools = kafka_tools(root, cluster.bootstrap)
        env = {**env, "KAFKA_PATH": str(tools), "BROKERS": cluster.kafka_bootstrap}
        command = ["./test-runner", "-L", "-s", args.scenario, *flags]
        # One run per SUBTESTS value, on the same nodes: a test stops at its first
        # failing sub-test, so the ones after it are picked by name.
        codes = [
            run_bounded(command, tests_dir, {**env, "SUBTESTS": sub}, args.timeout)
            for sub in subtests
        ]
        return next((c for c in codes if c), 0)
    finally:
        cluster.stop_all()


# Kafka's shell tools that librdkafka's tests call (test_kafka_topics, test_kafka_cmd),
# and the seglog commands that take the same arguments.
KAFKA_TOOLS = {"kafka-topics.sh": "topics", "kafka-acls.sh": "acls", "kafka-configs.sh": "configs"}


def kafka_tools(root: Path, grpc_bootstrap: str) -> Path:
    """A directory laid out as a Kafka install's bin/, each tool running seglog's own.
    seglog's tools speak gRPC: the tests name the Kafka listeners in --bootstrap-server,
    so the gRPC listeners are given after the test's arguments (the last one counts)."""
    home = root / "kafka-tools"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    for tool, verb in KAFKA_TOOLS.items():
        script = home / "bin" / tool
        script.write_text(
            f"#!/bin/sh\nexec {sys.executable} -m seglog.cli {verb} "
            f'"$@" --bootstrap-server {grpc_bootstrap}\n'
        )
        script.chmod(0o755)
    return home


def run_bounded(command: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float) -> int:
    """`run`, ended (SIGTERM to its process group, then SIGKILL) after `timeout_s`."""
    print("+", " ".join(command), f"(in {cwd}, at most {timeout_s:.0f} s)", flush=True)
    proc = subprocess.Popen(command, cwd=cwd, env={**os.environ, **env}, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"{command[0]} still running after {timeout_s:.0f} s: stopped", flush=True)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 124


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
    parser.add_argument(
        "--subtests",
        help="librdkafka: SUBTESTS, a sub-test name's part (several, comma-separated: "
        "one run each on the same nodes)",
    )
    parser.add_argument(
        "--scenario",
        choices=("default", "noautocreate"),
        default="default",
        help="librdkafka: the trivup scenario the nodes are set up as (tests/scenarios/)",
    )
    parser.add_argument("--quick", action="store_true", help="librdkafka: -Q, quick mode")
    parser.add_argument(
        "--local", action="store_true", help="librdkafka: -l, the local tests only (no nodes)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="librdkafka: stop the run after this (s)"
    )
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
        code = librdkafka(checkout, root, args)
    else:
        code = aiokafka(checkout)
    if code == 0:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"the suite failed (exit {code}); the nodes' data and logs are in {root}")
    return code


if __name__ == "__main__":
    sys.exit(main())
