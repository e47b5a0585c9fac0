"""A ProduceStream call driven from a test: requests go out as they are put, answers
come back in order (node/produce_stream.py)."""

from __future__ import annotations

import queue
from collections.abc import Iterator

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

TIMEOUT_S = 30.0


class ProduceStream:
    """One ProduceStream call: requests go out as they are put, answers come back in
    `answers` (a blocking iterator)."""

    def __init__(
        self, stub: client_pb2_grpc.SegLogStub, metadata: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self._requests: queue.SimpleQueue[pb.ProduceStreamRequest | None] = queue.SimpleQueue()
        self.answers: Iterator[pb.ProduceStreamResponse] = stub.ProduceStream(
            iter(self._requests.get, None), metadata=metadata, timeout=TIMEOUT_S
        )

    def send(self, correlation_id: int, request: pb.ProduceRequest) -> None:
        self._requests.put(pb.ProduceStreamRequest(correlation_id=correlation_id, request=request))

    def close(self) -> None:
        self._requests.put(None)


def produce_request(topic: str, partition: int, batch: bytes, acks: int = -1) -> pb.ProduceRequest:
    request = pb.ProduceRequest(acks=acks, timeout_ms=10_000)
    request.topics.add(name=topic).partitions.add(partition=partition, records=batch)
    return request
