"""A batch produced by confluent-kafka is stored byte for byte as the client sent it,
apart from baseOffset and partitionLeaderEpoch (which are outside the CRC): the node's
advertised Kafka address is a recording proxy in front of its listener, so every
Produce request the client sends is captured on the way."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from pathlib import Path

import pytest
from kafka.protocol.producer import ProduceRequest

from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.storage.record_batch import LOG_OVERHEAD

ck = pytest.importorskip("confluent_kafka")


class RecordingProxy:
    """Forwards connections to `target`; keeps the body of every Produce request."""

    def __init__(self, port: int, target: int) -> None:
        self.target = target
        self.produce_requests: list[tuple[int, bytes]] = []  # (version, body after header)
        self._sock = socket.create_server(("127.0.0.1", port))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the node stopped first: the client sees its connection close
                client.close()
                continue
            for src, dst, record in ((client, server, True), (server, client, False)):
                t = threading.Thread(target=self._pump, args=(src, dst, record), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = bytearray()
        src.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        size = struct.unpack_from(">i", buf)[0]
                        frame = bytes(buf[4 : 4 + size])
                        del buf[: 4 + size]
                        self._keep(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _keep(self, frame: bytes) -> None:
        api_key, version = struct.unpack_from(">hh", frame)
        if api_key != 0:
            return
        import io

        stream = io.BytesIO(frame)
        ProduceRequest.parse_header(stream, version=version)
        self.produce_requests.append((version, frame[stream.tell() :]))


def _batches(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + LOG_OVERHEAD <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + LOG_OVERHEAD
        out.append(data[pos : pos + size])
        pos += size
    return out


def _mask(batch: bytes) -> bytes:
    """Without baseOffset (bytes 0-7) and partitionLeaderEpoch (bytes 12-15)."""
    return batch[8:12] + batch[16:]


def test_confluent_kafka_batches_are_stored_byte_identical(tmp_path: Path):
    grpc_port, kafka_port, proxy_port = free_port(), free_port(), free_port()
    node = NodeProcess(
        tmp_path / "node",
        1,
        grpc_port,
        {
            "listeners": f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}",
            "advertised.listeners": (
                f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{proxy_port}"
            ),
        },
    )
    proxy = RecordingProxy(proxy_port, kafka_port)
    node.start()
    try:
        producer = ck.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{proxy_port}",
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "lz4",
                "linger.ms": 20,
                "batch.size": 16384,  # several batches
            }
        )
        for i in range(2000):
            producer.produce("bytes", value=b"record-%06d-" % i + b"z" * 50, key=b"k%d" % (i % 5))
            producer.poll(0)
        assert producer.flush(30) == 0
        sent: list[bytes] = []
        for version, body in proxy.produce_requests:
            request = ProduceRequest.decode(body, version=version)
            for t in request.topic_data:
                for p in t.partition_data:
                    if t.name == "bytes":
                        sent.extend(_batches(p.records))
        assert sent, "the proxy saw no Produce request"
        segment = next(d for d in node.log_dirs if (d / "bytes-0").exists()) / "bytes-0"
        stored = _batches((segment / "00000000000000000000.log").read_bytes())
        sent_masked = {_mask(b) for b in sent}
        # Retries (if any) were deduplicated: one stored batch per distinct sent one.
        assert len(stored) > 1 and len(stored) == len(sent_masked)
        for b in stored:
            assert _mask(b) in sent_masked, "a stored batch differs from what the client sent"
        assert all(struct.unpack_from(">h", b, 21)[0] & 0x07 == 3 for b in stored)  # lz4, kept
    finally:
        node.stop()
        proxy.close()
