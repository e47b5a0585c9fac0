"""ProduceStream against a real node: requests sent back to back on one call are
appended in the order sent (an idempotent producer's sequences, which the node checks,
would refuse any other order with OUT_OF_ORDER_SEQUENCE_NUMBER) and answered in that
order with their correlation ids; a bad request is answered with its error and the
requests after it still are; a producer that closes its side gets every answer first."""

from __future__ import annotations

import time

import grpc

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.harness.node_process import NodeProcess
from seglog.harness.produce_stream_call import ProduceStream, produce_request
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2
from seglog.storage.record_batch import NewRecord, build_batch

E = errors_pb2.ErrorCode
TIMEOUT_S = 30.0


def create(node: NodeProcess, topic: str, partitions: int) -> None:
    admin = Admin(node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def read_values(node: NodeProcess, topic: str, partition: int, n: int) -> list[bytes | None]:
    consumer = Consumer(bootstrap_servers=node.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        got: list[bytes | None] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        return got
    finally:
        consumer.close()


def test_requests_sent_back_to_back_are_appended_and_answered_in_order(shared_node):
    topic, n = "ps-order", 40
    create(shared_node, topic, 2)
    with grpc.insecure_channel(shared_node.bootstrap) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        ids = stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
        assert ids.error_code == E.NONE, ids
        stream = ProduceStream(stub)
        sequences = {0: 0, 1: 0}
        for i in range(n):
            p = i % 2
            batch = build_batch(
                [NewRecord(b"%d" % i)],
                producer_id=ids.producer_id,
                producer_epoch=ids.producer_epoch,
                base_sequence=sequences[p],
            )
            sequences[p] += 1
            stream.send(1000 + i, produce_request(topic, p, batch))
        stream.close()
        answers = list(stream.answers)
    assert [a.correlation_id for a in answers] == [1000 + i for i in range(n)]
    offsets: dict[int, list[int]] = {0: [], 1: []}
    for a in answers:
        ((t,),) = [a.response.topics]
        (p,) = t.partitions
        assert p.error_code == E.NONE, p
        offsets[p.partition].append(p.base_offset)
    assert offsets == {0: list(range(n // 2)), 1: list(range(n // 2))}
    for p in (0, 1):
        assert read_values(shared_node, topic, p, n // 2) == [b"%d" % i for i in range(p, n, 2)]


def test_a_bad_request_is_answered_with_its_error_and_the_stream_goes_on(shared_node):
    topic = "ps-errors"
    create(shared_node, topic, 1)
    batch = build_batch([NewRecord(b"v")])
    with grpc.insecure_channel(shared_node.bootstrap) as channel:
        stream = ProduceStream(client_pb2_grpc.SegLogStub(channel))
        stream.send(1, produce_request(topic, 0, batch, acks=7))
        stream.send(2, produce_request("ps-no-such-topic", 0, batch))
        stream.send(3, produce_request(topic, 0, b"\x00" * 70))  # not a record batch
        stream.send(4, produce_request(topic, 0, batch))
        stream.close()
        answers = {a.correlation_id: a.response.topics[0].partitions[0] for a in stream.answers}
    assert answers[1].error_code == E.INVALID_REQUIRED_ACKS
    assert "acks must be -1, 0 or 1, got 7" in answers[1].error_message
    assert answers[2].error_code == E.UNKNOWN_TOPIC_OR_PARTITION, answers[2]
    assert answers[3].error_code == E.CORRUPT_MESSAGE, answers[3]
    assert answers[4].error_code == E.NONE and answers[4].base_offset == 0, answers[4]
    assert read_values(shared_node, topic, 0, 1) == [b"v"]
