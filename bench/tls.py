"""TLS benchmark: the same three-node cluster twice in one run, one with every
listener PLAINTEXT, one with TLS on every connection (the Kafka listener, the gRPC
listener with client certificates required, replication and the Raft quorum over
mTLS), and confluent-kafka producing then consuming 1 KiB records (RF=3,
min.insync.replicas=2, acks=all, idempotent) for --seconds in each. The issue's
target: produce and consume MiB/s with TLS at least 0.7x the plaintext figures.

Both clusters run for the whole benchmark and the phases alternate between them,
--rounds times, in the order A B B A A B ...: on a shared machine whose load drifts,
two phases a minute apart compare two moments as much as two configurations. The
figures are each mode's median over the rounds, and the ratios of those medians.

    python bench/tls.py [--quick] [--rounds N] [--seconds S] [--partitions N] [--dir D]

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seglog.bench.measure import librdkafka_produce_until
from seglog.bench.options import add_options, quick_or_full, work_dir
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port, quorum_ports

ROOT = Path(__file__).resolve().parents[1]

MIB = 1024 * 1024
TOPIC = "tls-bench"
TARGET_RATIO = 0.7
NODE_IDS = (1, 2, 3)
VALUE = 1024


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Cluster:
    def __init__(self, root: Path, tls: bool) -> None:
        import grpc

        from seglog.node.security.certificates import CertificateAuthority

        self.tls = tls
        grpc_ports, controller, voters = quorum_ports(NODE_IDS)
        self.kafka_ports = {i: free_port() for i in NODE_IDS}
        props = {
            "controller.quorum.voters": voters,
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            "replica.fetch.backoff.ms": "100",
            "broker.heartbeat.interval.ms": "300",
            "broker.session.timeout.ms": "3000",
            "log.initial.task.delay.ms": "30000",
        }
        self.client_options: dict[str, str] = {}
        self.librdkafka: dict[str, str] = {}
        credentials = None
        if tls:
            certs = root / "certs"
            certs.mkdir(parents=True)
            ca = CertificateAuthority()
            ca_file = ca.write(certs / "ca.pem")
            client = ca.issue("bench-client").write(certs / "client.pem")
            props.update(
                {
                    "listener.security.protocol.map": (
                        "GRPC:SSL,REPLICATION:SSL,CONTROLLER:SSL,CLIENTS:SSL"
                    ),
                    "ssl.truststore.location": str(ca_file),
                    "ssl.client.auth": "required",
                }
            )
            self.client_options = {
                "security_protocol": "SSL",
                "ssl_cafile": str(ca_file),
                "ssl_certfile": str(client),
            }
            self.librdkafka = {
                "security.protocol": "SSL",
                "ssl.ca.location": str(ca_file),
                "ssl.certificate.location": str(client),
                "ssl.key.location": str(client),
            }
            data = client.read_bytes()
            cut = data.index(b"-----BEGIN CERTIFICATE-----")
            credentials = grpc.ssl_channel_credentials(ca.cert_pem, data[:cut], data[cut:])
        else:
            props["listener.security.protocol.map"] = (
                "GRPC:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENTS:PLAINTEXT"
            )
        self.nodes: dict[int, NodeProcess] = {}
        for i in NODE_IDS:
            node_props = {
                **props,
                "listeners": f"GRPC://127.0.0.1:{grpc_ports[i]},"
                f"REPLICATION://127.0.0.1:{free_port()},"
                f"CONTROLLER://127.0.0.1:{controller[i]},"
                f"CLIENTS://127.0.0.1:{self.kafka_ports[i]}",
                "inter.broker.listener.name": "REPLICATION",
            }
            if tls:
                node_props["ssl.keystore.location"] = str(
                    ca.issue(f"node-{i}", ["127.0.0.1"]).write(certs / f"node-{i}.pem")
                )
            n = NodeProcess(root / "nodes", i, grpc_ports[i], node_props, controller[i])
            n.credentials = credentials
            self.nodes[i] = n

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports.values())

    def start(self) -> None:
        for n in self.nodes.values():
            n.start(timeout_s=60)

    def create_topic(self, topic: str, partitions: int) -> None:
        from seglog.client.admin import Admin, NewTopic
        from seglog.client.errors import KafkaError

        deadline = time.monotonic() + 60
        with Admin(self.bootstrap, **self.client_options) as admin:
            while True:
                try:
                    admin.create_topics([NewTopic(topic, partitions, 3)])
                    break
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        time.sleep(1.0)  # leaders elected and followers fetching

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()


def produce(ck: Any, conf: dict[str, str], topic: str, seconds: float) -> tuple[float, int]:
    producer = ck.Producer({**conf, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
    value = os.urandom(VALUE)
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    producer.produce(topic, value, on_delivery=report)
    producer.flush(30)  # warm-up: connections, producer id
    start = time.perf_counter()
    n = librdkafka_produce_until(
        producer,
        start + seconds,
        lambda _i: producer.produce(topic, value, on_delivery=report),
        0,
        "produce: records left undelivered",
    )
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"produce: {len(failed)} failed, e.g. {failed[0]}")
    return n * VALUE / MIB / elapsed, n + 1


def consume(ck: Any, conf: dict[str, str], topic: str, partitions: int, total: int) -> float:
    consumer = ck.Consumer(
        {
            **conf,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MIB,
            "max.partition.fetch.bytes": 4 * MIB,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 300
    while got < total and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if got != total:
        raise AssertionError(f"consume: read {got} of {total} records")
    return got * VALUE / MIB / elapsed


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short phases (smoke run)")
    parser.add_argument("--seconds", type=float, default=None, help="per produce phase (8)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=None, help="phases per mode (4)")
    add_options(parser, "--dir")
    args = parser.parse_args(argv)
    quick_or_full(args, seconds=(2.0, 8.0), rounds=(1, 4))
    if args.rounds < 1 or args.seconds <= 0:
        parser.error("--rounds must be at least 1 and --seconds positive")
    return args


def round_order(rounds: int) -> list[str]:
    """A B B A A B ...: each mode runs first as often as second."""
    out: list[str] = []
    for i in range(rounds):
        out += ["plaintext", "tls"] if i % 2 == 0 else ["tls", "plaintext"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import confluent_kafka as ck

    root = work_dir(args.dir, "seglog-tls-bench-")
    results: dict[str, Any] = {
        "benchmark": "tls",
        "seconds": args.seconds,
        "rounds": args.rounds,
        "load_start": os.getloadavg()[0],
    }
    say(
        f"seglog TLS bench: 3 nodes, RF=3, acks=all, idempotent, 1 KiB records, "
        f"{args.rounds} x {args.seconds:g} s produce per mode, alternating, librdkafka "
        f"{ck.libversion()[0]}, {os.cpu_count()} CPUs"
    )
    figures: dict[str, dict[str, list[float]]] = {
        m: {"produce": [], "consume": []} for m in ("plaintext", "tls")
    }
    clusters: dict[str, Cluster] = {}
    try:
        for mode in ("plaintext", "tls"):
            clusters[mode] = Cluster(root / mode, tls=mode == "tls")
            clusters[mode].start()
        for i, mode in enumerate(round_order(args.rounds)):
            cluster = clusters[mode]
            topic = f"{TOPIC}-{i}"
            cluster.create_topic(topic, args.partitions)
            conf = {"bootstrap.servers": cluster.kafka_bootstrap, **cluster.librdkafka}
            mb_s, records = produce(ck, conf, topic, args.seconds)
            mb_c = consume(ck, conf, topic, args.partitions, records)
            figures[mode]["produce"].append(round(mb_s, 2))
            figures[mode]["consume"].append(round(mb_c, 2))
            say(
                f"  {mode}: produce {mb_s:.1f} MiB/s, consume {mb_c:.1f} MiB/s "
                f"(load {os.getloadavg()[0]:.1f})"
            )
    finally:
        for cluster in clusters.values():
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    results["load_end"] = os.getloadavg()[0]
    results["phases"] = figures
    for phase in ("produce", "consume"):
        plain = statistics.median(figures["plaintext"][phase])
        tls = statistics.median(figures["tls"][phase])
        results[f"plaintext_{phase}_mb_s"] = round(plain, 2)
        results[f"tls_{phase}_mb_s"] = round(tls, 2)
        results[f"tls_{phase}_ratio"] = round(tls / plain, 3) if plain else None
    results["target_ratio"] = TARGET_RATIO
    results["meets_target"] = all(
        (results[f"tls_{p}_ratio"] or 0) >= TARGET_RATIO for p in ("produce", "consume")
    )
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
