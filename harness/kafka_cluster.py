"""Real node processes with a Kafka (PLAINTEXT) listener beside gRPC, for the Kafka
protocol tests and benchmarks: the three voters of `cluster.ThreeNodeCluster` with one more port
each, and a raw Kafka connection that sends requests encoded by kafka-python and reads
the response frames back (for the tests that need exact bytes or bad input)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster, topic_of
from seglog.harness.ports import free_port

# Node settings for the group tests and benchmark: rebalances without Kafka's 3 s
# initial delay, and sessions short enough to see expiries in seconds.
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}

# A session timeout that notices a SIGKILLed leader in about a second, as local up.
KAFKA_OVERRIDES = {
    "num.partitions": "1",
    "default.replication.factor": "3",
    "replica.fetch.backoff.ms": "100",
    "controller.quorum.election.timeout.ms": "500",
    # Followers fetch over Kafka's inter-broker protocol on the PLAINTEXT listener, as
    # `seglog local up` runs them (the gRPC-only clusters replicate over gRPC).
    "replica.fetch.protocol": "kafka",
}


class KafkaCluster(ThreeNodeCluster):
    session_timeout_ms = 1500
    wait_s = 30.0

    def __init__(self, root: Path, overrides: Mapping[str, str] | None = None) -> None:
        super().__init__(root, {**KAFKA_OVERRIDES, **(overrides or {})})
        self.kafka_ports = {i: free_port() for i in NODE_IDS}
        for i, n in self.nodes.items():
            text = n.config_path.read_text()
            lines = []
            for line in text.splitlines():
                if line.startswith("listeners="):
                    line += f",PLAINTEXT://127.0.0.1:{self.kafka_ports[i]}"
                lines.append(line)
            n.config_path.write_text("\n".join(lines) + "\n")

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports.values())

    def start_all(self) -> None:
        super().start_all()
        self.wait("three unfenced brokers", lambda: True if self.all_up_and_unfenced() else None)

    def known_everywhere(self, topic: str, partitions: int) -> bool | None:
        """True once every node's metadata holds the topic's partitions with leaders: a
        node answers for a topic only when its own metadata has it (a commit to one that
        lags is UNKNOWN_TOPIC_OR_PARTITION, as on Kafka)."""
        for i in self.nodes:
            t = topic_of(self.metadata(i, [topic]), topic)
            if t is None or sum(1 for p in t.partitions if p.leader_id >= 0) < partitions:
                return None
        return True

    def leader_of(self, topic: str, partition: int = 0) -> int | None:
        md = self.metadata(1, [topic]) or self.metadata(2, [topic]) or self.metadata(3, [topic])
        if md is None:
            return None
        for t in md.topics:
            if t.name == topic and not t.error_code:
                for p in t.partitions:
                    if p.partition == partition and p.leader_id >= 0:
                        return int(p.leader_id)
        return None


_SIZE = struct.Struct(">i")


def produce_request(
    topic: str,
    partition: int,
    records: bytes,
    *,
    version: int = 9,
    transactional_id: str | None = None,
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> Any:
    """A Produce of one partition's records (kafka-python's protocol classes)."""
    from kafka.protocol.producer import ProduceRequest as R

    return R[version](
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            R.TopicProduceData(
                name=topic,
                partition_data=[
                    R.TopicProduceData.PartitionProduceData(index=partition, records=records)
                ],
            )
        ],
    )


class KafkaConnection:
    """One raw connection to a Kafka listener."""

    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any) -> int:
        return self.send_together(request)[0]

    def send_together(self, *requests: Any) -> list[int]:
        """Pipelined requests in one write (the node finds them in its buffer at once);
        their correlation ids."""
        frames, ids = [], []
        for request in requests:
            self.correlation_id += 1
            request.with_header(correlation_id=self.correlation_id, client_id="seglog-tests")
            frames.append(bytes(request.encode(header=True, framed=True)))
            ids.append(self.correlation_id)
        self.sock.sendall(b"".join(frames))
        return ids

    def read_frame(self) -> bytes:
        size = _SIZE.unpack(self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def request(self, request: Any) -> tuple[bytes, Any]:
        """Send and read the answer: (body bytes after the response header, decoded)."""
        return self.answer(request, self.send(request))

    def answer(self, request: Any, cid: int) -> tuple[bytes, Any]:
        """Read the answer to `request`, sent as `cid` (the next frame must be it)."""
        frame = self.read_frame()
        assert _SIZE.unpack_from(frame)[0] == cid
        cls = response_class(request)
        # ApiVersions answers with response header v0 at every version (KIP-511).
        flexible = cls.flexible_version_q(request.API_VERSION) and request.API_KEY != 18
        body = frame[5:] if flexible else frame[4:]
        return body, cls.decode(body, version=request.API_VERSION)

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the node closes the connection (EOF or reset) within the time."""
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False


def response_class(request: Any) -> Any:
    import kafka.protocol.api_header as h

    return h.ResponseClassRegistry.get_response_class(request.header)


def read_partition_values(
    bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 30.0
) -> list[bytes]:
    """Every value in the partition from its log start to its high watermark, in order,
    read by confluent-kafka straight from the node's Kafka listener."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        c.assign([TopicPartition(topic, partition, low)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < high - low and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        assert len(values) == high - low, f"read {len(values)} of {high - low} records"
        return values
    finally:
        c.close()
