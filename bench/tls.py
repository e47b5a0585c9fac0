"""TLS benchmark: the same three-node cluster twice in one run, first with every
listener PLAINTEXT, then with TLS on every connection (the Kafka listener, the gRPC
listener with client certificates required, replication and the Raft quorum over
mTLS), and confluent-kafka producing then consuming 1 KiB records (RF=3,
min.insync.replicas=2, acks=all, idempotent) for --seconds in each. The issue's
target: produce and consume MiB/s with TLS at least 0.7x the plaintext figures.

    python bench/tls.py [--quick] [--seconds S] [--partitions N] [--dir D]

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from node_process import NodeProcess, free_port  # noqa: E402 - the tests' node helper

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
        grpc_ports = {i: free_port() for i in NODE_IDS}
        controller = {i: free_port() for i in NODE_IDS}
        self.kafka_ports = {i: free_port() for i in NODE_IDS}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller.items())
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

    def start(self, partitions: int) -> None:
        from seglog.client.admin import Admin, NewTopic
        from seglog.client.errors import KafkaError

        for n in self.nodes.values():
            n.start(timeout_s=60)
        deadline = time.monotonic() + 60
        with Admin(self.bootstrap, **self.client_options) as admin:
            while True:
                try:
                    admin.create_topics([NewTopic(TOPIC, partitions, 3)])
                    break
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        time.sleep(1.0)  # leaders elected and followers fetching

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()


def produce(ck: Any, conf: dict[str, str], seconds: float) -> tuple[float, int]:
    producer = ck.Producer({**conf, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
    value = os.urandom(VALUE)
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    producer.produce(TOPIC, value, on_delivery=report)
    producer.flush(30)  # warm-up: connections, producer id
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(256):
            try:
                producer.produce(TOPIC, value, on_delivery=report)
                n += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("produce: records left undelivered")
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"produce: {len(failed)} failed, e.g. {failed[0]}")
    return n * VALUE / MIB / elapsed, n + 1


def consume(ck: Any, conf: dict[str, str], partitions: int, total: int) -> float:
    consumer = ck.Consumer(
        {
            **conf,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MIB,
            "max.partition.fetch.bytes": 4 * MIB,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(partitions)])
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
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dir")
    args = parser.parse_args(argv)
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 8.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import confluent_kafka as ck

    root = Path(tempfile.mkdtemp(prefix="seglog-tls-bench-", dir=args.dir))
    results: dict[str, Any] = {"benchmark": "tls", "seconds": args.seconds}
    say(
        f"seglog TLS bench: 3 nodes, RF=3, acks=all, idempotent, 1 KiB records, "
        f"{args.seconds:g} s produce per mode, librdkafka {ck.libversion()[0]}, "
        f"{os.cpu_count()} CPUs"
    )
    try:
        for mode in ("plaintext", "tls"):
            cluster = Cluster(root / mode, tls=mode == "tls")
            try:
                cluster.start(args.partitions)
                conf = {"bootstrap.servers": cluster.kafka_bootstrap, **cluster.librdkafka}
                mb_s, records = produce(ck, conf, args.seconds)
                results[f"{mode}_produce_mb_s"] = round(mb_s, 2)
                mb_c = consume(ck, conf, args.partitions, records)
                results[f"{mode}_consume_mb_s"] = round(mb_c, 2)
                say(f"  {mode}: produce {mb_s:.1f} MiB/s, consume {mb_c:.1f} MiB/s")
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for phase in ("produce", "consume"):
        plain = results[f"plaintext_{phase}_mb_s"]
        ratio = results[f"tls_{phase}_mb_s"] / plain if plain else None
        results[f"tls_{phase}_ratio"] = round(ratio, 3) if ratio is not None else None
    results["target_ratio"] = TARGET_RATIO
    results["meets_target"] = all(
        (results[f"tls_{p}_ratio"] or 0) >= TARGET_RATIO for p in ("produce", "consume")
    )
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
