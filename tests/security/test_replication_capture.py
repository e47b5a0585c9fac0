"""Replication between nodes travels encrypted: three voters whose gRPC, REPLICATION
and CONTROLLER listeners are all mapped to SSL with client certificates required, and
every node's REPLICATION listener advertised behind a relay that records the bytes
passing through. The followers store the records (read back from their segment
files), and the recorded replication traffic holds none of the payload. The same
cluster in plaintext shows the relay does see the payload when it is in clear. With
replica.fetch.protocol=kafka, REPLICATION is a Kafka listener and the followers'
fetchers present their node's certificate to it; on a SASL_PLAINTEXT REPLICATION
listener behind an authorizer they log in as the broker user (a super user), and a
node with a wrong inter-broker password replicates nothing and says why."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.node.security.certificates import CertificateAuthority

MARKER = b"seglog-secret-payload-7f3a9c"
CAPTURE_LIMIT = 64 << 20


class Relay:
    """A TCP relay on loopback that keeps a copy of both directions (bounded)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.captured = bytearray()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stopped = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                t.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.5)
        try:
            while not self._stopped.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                with self._lock:
                    if len(self.captured) < CAPTURE_LIMIT:
                        self.captured += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stopped.set()
        self._server.close()


class Cluster:
    def __init__(
        self,
        root: Path,
        tls: bool,
        fetch_protocol: str = "grpc",
        sasl: bool = False,
        passwords: dict[int, str] | None = None,
    ) -> None:
        ids = (1, 2, 3)
        self.grpc = {i: free_port() for i in ids}
        replication = {i: free_port() for i in ids}
        controller = {i: free_port() for i in ids}
        self.relays = {i: Relay(replication[i]) for i in ids}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller.items())
        self.options: dict[str, str] = {}
        common = {
            "controller.quorum.voters": voters,
            "inter.broker.listener.name": "REPLICATION",
            "default.replication.factor": "3",
            "replica.fetch.backoff.ms": "100",
            "broker.heartbeat.interval.ms": "300",
            "broker.session.timeout.ms": "3000",
            "replica.fetch.protocol": fetch_protocol,
        }
        if fetch_protocol == "kafka":
            common["grpc.listener.names"] = "GRPC"  # REPLICATION speaks Kafka's protocol
        if sasl:  # followers log in as User:broker, a super user behind an authorizer
            common.update(
                {
                    "listener.security.protocol.map": (
                        "GRPC:PLAINTEXT,REPLICATION:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
                    ),
                    "sasl.enabled.mechanisms": "PLAIN",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                    "authorizer.class.name": "StandardAuthorizer",
                    "super.users": "User:broker;User:ANONYMOUS",
                }
            )
        credentials = None
        if tls:
            certs = root / "certs"
            certs.mkdir(parents=True)
            ca = CertificateAuthority()
            ca_file = ca.write(certs / "ca.pem")
            client = ca.issue("test-client").write(certs / "client.pem")
            common.update(
                {
                    "listener.security.protocol.map": "GRPC:SSL,REPLICATION:SSL,CONTROLLER:SSL",
                    "ssl.truststore.location": str(ca_file),
                    "ssl.client.auth": "required",
                }
            )
            self.options = {
                "security_protocol": "SSL",
                "ssl_cafile": str(ca_file),
                "ssl_certfile": str(client),
            }
            data = client.read_bytes()
            cut = data.index(b"-----BEGIN CERTIFICATE-----")
            credentials = grpc.ssl_channel_credentials(ca.cert_pem, data[:cut], data[cut:])
        self.nodes: dict[int, NodeProcess] = {}
        for i in ids:
            props = {
                **common,
                "listeners": f"GRPC://127.0.0.1:{self.grpc[i]},"
                f"REPLICATION://127.0.0.1:{replication[i]},"
                f"CONTROLLER://127.0.0.1:{controller[i]}",
                "advertised.listeners": f"GRPC://127.0.0.1:{self.grpc[i]},"
                f"REPLICATION://127.0.0.1:{self.relays[i].port}",
            }
            if sasl:
                password = (passwords or {}).get(i, "b-secret")
                props["listener.name.replication.plain.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="broker" password="{password}" user_broker="b-secret";'
                )
            if tls:
                props["ssl.keystore.location"] = str(
                    ca.issue(f"node-{i}", ["127.0.0.1"]).write(certs / f"node-{i}.pem")
                )
            n = NodeProcess(root / "nodes", i, self.grpc[i], props, controller[i])
            n.credentials = credentials
            self.nodes[i] = n

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.grpc.values())

    def start(self) -> None:
        # Side by side: one at a time, the first waits for a quorum that cannot form.
        starters = [
            threading.Thread(target=n.start, kwargs={"timeout_s": 60}) for n in self.nodes.values()
        ]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        for n in self.nodes.values():
            n.wait_healthy(1)  # raises for a node that did not start

    def stop(self) -> None:
        for n in self.nodes.values():  # all at once: the shutdowns overlap
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes.values():
            n.stop()
        for r in self.relays.values():
            r.close()

    def captured(self) -> bytes:
        return b"".join(bytes(r.captured) for r in self.relays.values())

    def stored_on(self, node: int, topic: str) -> bytes:
        n = self.nodes[node]
        return b"".join(p.read_bytes() for d in n.log_dirs for p in d.glob(f"{topic}-0/*.log"))


@pytest.fixture(params=["SSL", "PLAINTEXT", "SSL-kafka", "SASL_PLAINTEXT-kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Cluster]]:
    protocol, _, fetch = request.param.partition("-")
    c = Cluster(
        tmp_path,
        tls=protocol == "SSL",
        fetch_protocol=fetch or "grpc",
        sasl=protocol == "SASL_PLAINTEXT",
    )
    try:
        c.start()
        yield protocol, c
    finally:
        c.stop()


def create_topic(c: Cluster, topic: str, partitions: int = 1) -> None:
    """Retried until the three brokers are registered (a loaded machine starts them late)."""
    deadline = time.monotonic() + 60
    with Admin(c.bootstrap, **c.options) as admin:
        while True:
            try:
                admin.create_topics([NewTopic(topic, partitions, 3)])
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def test_replication_traffic_holds_no_payload_in_clear(cluster):
    protocol, c = cluster
    topic = "capture"
    create_topic(c, topic)
    producer = Producer(c.bootstrap, acks="all", linger_ms=0, **c.options)
    for i in range(20):
        producer.send(topic, MARKER + str(i).encode()).get(timeout=30)
    producer.close()
    # Every replica stores the payload, so it went over the replication listener.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(MARKER + b"19" in c.stored_on(i, topic) for i in c.nodes):
            break
        time.sleep(0.2)
    assert all(MARKER + b"19" in c.stored_on(i, topic) for i in c.nodes)
    captured = c.captured()
    assert len(captured) > 1000, "the relays saw no replication traffic"
    if protocol == "SSL":
        assert MARKER not in captured
    else:
        assert MARKER in captured  # the capture does see a payload in clear


def test_a_follower_with_a_wrong_password_replicates_nothing_and_says_why(tmp_path):
    c = Cluster(tmp_path, tls=False, fetch_protocol="kafka", sasl=True, passwords={3: "Wr0ngPa55"})

    def records_on(node: int) -> int:
        n = c.nodes[node]
        files = [p for d in n.log_dirs for p in d.glob("refused-*/*.log")]
        return sum(p.read_bytes().count(MARKER) for p in files)

    try:
        c.start()
        create_topic(c, "refused", 3)
        producer = Producer(c.bootstrap, acks=1, linger_ms=0)
        for i in range(30):
            producer.send("refused", MARKER + str(i).encode(), partition=i % 3).get(timeout=30)
        producer.close()
        # Nodes 1 and 2 log in with the right password: they hold every partition.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and min(records_on(1), records_on(2)) < 30:
            time.sleep(0.3)
        assert (records_on(1), records_on(2)) == (30, 30)
        # Node 3 holds only what it leads (about a third), and its log says why.
        assert records_on(3) < 30
        # Its first login may come after the others caught up (a loaded machine): wait.
        deadline = time.monotonic() + 30
        while True:
            text = c.nodes[3].log_path.read_text(errors="replace")
            if "fetcher_login_failed" in text or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert "fetcher_login_failed" in text and "SASL_AUTHENTICATION_FAILED" in text
        assert "Wr0ngPa55" not in text  # never the password
    finally:
        c.stop()


def test_transaction_markers_log_in_to_a_sasl_listener(tmp_path):
    """The transaction coordinator writes its COMMIT markers to the other leaders over
    their SASL_PLAINTEXT Kafka listener, logging in first as the followers do: a
    read_committed consumer then reads every committed record (without the login the
    markers are refused, the LSO stays put and it reads none)."""
    from seglog.client import Consumer, TopicPartition

    c = Cluster(tmp_path, tls=False, fetch_protocol="kafka", sasl=True)
    try:
        c.start()
        create_topic(c, "txn-sasl", 3)
        producer = Producer(c.bootstrap, transactional_id="txn-sasl", linger_ms=0)
        producer.init_transactions()
        producer.begin_transaction()
        values = [MARKER + b"-%d" % i for i in range(30)]
        for i, v in enumerate(values):
            producer.send("txn-sasl", v, partition=i % 3)
        producer.commit_transaction()
        producer.close()
        consumer = Consumer(
            bootstrap_servers=c.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            consumer_timeout_ms=5000,
        )
        consumer.assign([TopicPartition("txn-sasl", p) for p in range(3)])
        deadline, seen = time.monotonic() + 30, []
        while time.monotonic() < deadline and len(seen) < len(values):
            seen += [r.value for r in consumer]
        consumer.close()
        assert sorted(seen) == sorted(values)
        logs = "".join(n.log_path.read_text(errors="replace") for n in c.nodes.values())
        assert "txn_markers_login_failed" not in logs
    finally:
        c.stop()
