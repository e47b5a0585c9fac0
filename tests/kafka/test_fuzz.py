"""Hypothesis drives the Kafka listener's frame and request decoder with random bytes:
the decoder either returns a request or raises InvalidRequestError (the connection is
then closed), never anything else; and a socket server fed random byte streams stays
up and answers the next well-formed request."""

from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from seglog.node.kafka.codec import APIS, InvalidRequestError, KafkaRequest, parse_request
from seglog.node.kafka.metadata import api_versions
from seglog.node.kafka.socket_server import SocketServer
from seglog.node.kafka.socket_settings import SocketSettings


def _valid_frames() -> list[bytes]:
    frames = []
    for v in range(0, 5):
        r = ApiVersionsRequest[v](client_software_name="fuzz", client_software_version="1")
        r.with_header(correlation_id=v, client_id="fuzz")
        frames.append(bytes(r.encode(header=True)))
    for v in (0, 4, 9, 12):
        r = MetadataRequest[v](
            topics=[MetadataRequest.MetadataRequestTopic(name="t")],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        r.with_header(correlation_id=1, client_id="fuzz")
        frames.append(bytes(r.encode(header=True)))
    R = ProduceRequest
    r = R[9](
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            R.TopicProduceData(
                name="t",
                partition_data=[
                    R.TopicProduceData.PartitionProduceData(index=0, records=b"x" * 70)
                ],
            )
        ],
    )
    r.with_header(correlation_id=2, client_id="fuzz")
    frames.append(bytes(r.encode(header=True)))
    return frames


VALID = _valid_frames()


def _decode(data: bytes) -> None:
    try:
        request = parse_request(data)
    except InvalidRequestError:
        return
    assert isinstance(request, KafkaRequest)
    assert request.api_key in APIS


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_are_refused(data):
    _decode(data)


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    st.integers(0, 10_000),
)
def test_mutated_and_truncated_requests_decode_or_are_refused(frame, flips, cut):
    data = bytearray(frame)
    for at, value in flips:
        data[at % len(data)] = value
    _decode(bytes(data[: max(0, len(data) - cut % (len(data) + 1))]))


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(sorted(APIS)), st.integers(-2, 20), st.binary(max_size=200))
def test_any_served_api_key_with_random_body(api_key, version, body):
    _decode(struct.pack(">hhih", api_key, version, 7, -1) + body)


def _ask_api_versions(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        r = ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1")
        r.with_header(correlation_id=42, client_id="fuzz")
        s.sendall(bytes(r.encode(header=True, framed=True)))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        reply = s.recv(size, socket.MSG_WAITALL)
        return int(struct.unpack_from(">i", reply)[0])


def test_socket_server_survives_random_streams():
    def handler(request: KafkaRequest) -> list:
        return api_versions(request) if request.api_key == 18 else None

    server = SocketServer(
        "127.0.0.1",
        0,
        handler,
        SocketSettings(num_network_threads=2, num_io_threads=2, socket_request_max_bytes=4096),
    )
    server.start()
    try:

        @settings(max_examples=300, deadline=None)
        @given(st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=8))
        def feed(chunks) -> None:
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                for chunk in chunks:
                    try:
                        s.sendall(chunk)
                    except OSError:
                        break  # closed by the server: that is an answer too

        feed()
        assert _ask_api_versions(server.port) == 42
    finally:
        server.shutdown()
