"""Frames and messages of Kafka's protocol, on top of kafka-python's `kafka.protocol`
(request and response classes generated from Kafka's JSON message schemas).

A request frame is decoded into a `KafkaRequest`; a response body is encoded with its
header into the parts of one frame. A fetch response's records may be FileSlices of
segment files: the body is encoded with a placeholder in their place, and the frame
is cut around each placeholder so that the slice goes out with sendfile and only the
length prefix before it is rewritten."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from seglog.storage.file_slice import FileSlice

from . import hot_codec
from .schemas.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_INT32 = struct.Struct(">i")

Part = bytes | FileSlice


@dataclass(frozen=True)
class ApiSpec:
    """One API this listener serves: `served` versions are decoded and answered;
    `advertised_min` may be lower (Produce is advertised from 0 as Kafka 4 does:
    librdkafka only compresses when the advertised range starts low). An API that is
    not `listed` is served but left out of ApiVersions, as Kafka leaves out the
    telemetry APIs without a client-metrics receiver."""

    key: int
    name: str
    request: Any  # the kafka.protocol request class
    response: Any  # and its response class
    served: tuple[int, int]
    advertised_min: int | None = None
    listed: bool = True  # in ApiVersions' answer (Kafka hides some it serves)

    @property
    def advertised(self) -> tuple[int, int]:
        low = self.served[0] if self.advertised_min is None else self.advertised_min
        return low, self.served[1]


API_VERSIONS = 18
PRODUCE = 0
FETCH = 1

APIS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        # Produce v10 adds KIP-951's leader hints, v11 TRANSACTION_ABORTABLE (KIP-890);
        # v12 is KIP-890 part 2 (transaction version 2), not served.
        ApiSpec(0, "Produce", ProduceRequest, ProduceResponse, (3, 11), advertised_min=0),
        ApiSpec(1, "Fetch", FetchRequest, FetchResponse, (4, 17)),
        ApiSpec(2, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse, (1, 10)),
        ApiSpec(3, "Metadata", MetadataRequest, MetadataResponse, (0, 13)),
        # The group APIs (node/kafka/groups.py). OffsetCommit v10 and OffsetFetch v10
        # name topics by id (KIP-848's consumer protocol): not served yet.
        ApiSpec(8, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, (2, 9)),
        ApiSpec(9, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, (1, 9)),
        ApiSpec(10, "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, (0, 6)),
        # Kafka 4 (KIP-896) serves JoinGroup from v2.
        ApiSpec(11, "JoinGroup", JoinGroupRequest, JoinGroupResponse, (2, 9)),
        ApiSpec(12, "Heartbeat", HeartbeatRequest, HeartbeatResponse, (0, 4)),
        ApiSpec(13, "LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, (0, 5)),
        ApiSpec(14, "SyncGroup", SyncGroupRequest, SyncGroupResponse, (0, 5)),
        ApiSpec(15, "DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, (0, 6)),
        ApiSpec(16, "ListGroups", ListGroupsRequest, ListGroupsResponse, (0, 5)),
        ApiSpec(18, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, (0, 4)),
        ApiSpec(21, "DeleteRecords", DeleteRecordsRequest, DeleteRecordsResponse, (0, 2)),
        ApiSpec(19, "CreateTopics", CreateTopicsRequest, CreateTopicsResponse, (2, 7)),
        ApiSpec(20, "DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, (1, 6)),
        # KIP-890 part 1's versions (v5, v4, v4, v4: TRANSACTION_ABORTABLE known); EndTxn
        # v5 and TxnOffsetCommit v5 are part 2's (transaction version 2), not served.
        ApiSpec(22, "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, (0, 5)),
        ApiSpec(
            24, "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, (0, 5)
        ),
        ApiSpec(25, "AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, (0, 4)),
        ApiSpec(26, "EndTxn", EndTxnRequest, EndTxnResponse, (0, 4)),
        ApiSpec(27, "WriteTxnMarkers", WriteTxnMarkersRequest, WriteTxnMarkersResponse, (1, 2)),
        ApiSpec(28, "TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, (0, 4)),
        ApiSpec(
            61, "DescribeProducers", DescribeProducersRequest, DescribeProducersResponse, (0, 0)
        ),
        ApiSpec(
            65,
            "DescribeTransactions",
            DescribeTransactionsRequest,
            DescribeTransactionsResponse,
            (0, 0),
        ),
        ApiSpec(66, "ListTransactions", ListTransactionsRequest, ListTransactionsResponse, (0, 1)),
        ApiSpec(
            23,
            "OffsetForLeaderEpoch",
            OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            (2, 4),
        ),
        ApiSpec(33, "AlterConfigs", AlterConfigsRequest, AlterConfigsResponse, (0, 2)),
        ApiSpec(32, "DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, (1, 4)),
        # Kafka 4 (KIP-896) serves AlterReplicaLogDirs from v1.
        ApiSpec(
            34,
            "AlterReplicaLogDirs",
            AlterReplicaLogDirsRequest,
            AlterReplicaLogDirsResponse,
            (1, 2),
        ),
        ApiSpec(35, "DescribeLogDirs", DescribeLogDirsRequest, DescribeLogDirsResponse, (1, 4)),
        ApiSpec(37, "CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, (0, 3)),
        ApiSpec(42, "DeleteGroups", DeleteGroupsRequest, DeleteGroupsResponse, (0, 2)),
        ApiSpec(47, "OffsetDelete", OffsetDeleteRequest, OffsetDeleteResponse, (0, 0)),
        ApiSpec(43, "ElectLeaders", ElectLeadersRequest, ElectLeadersResponse, (0, 2)),
        ApiSpec(
            44,
            "IncrementalAlterConfigs",
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
            (0, 1),
        ),
        ApiSpec(
            45,
            "AlterPartitionReassignments",
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
            (0, 1),
        ),
        ApiSpec(
            46,
            "ListPartitionReassignments",
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
            (0, 0),
        ),
        ApiSpec(
            75,
            "DescribeTopicPartitions",
            DescribeTopicPartitionsRequest,
            DescribeTopicPartitionsResponse,
            (0, 0),
        ),
        # Client quotas (node/kafka/client_quotas.py).
        ApiSpec(
            48,
            "DescribeClientQuotas",
            DescribeClientQuotasRequest,
            DescribeClientQuotasResponse,
            (0, 1),
        ),
        ApiSpec(
            49, "AlterClientQuotas", AlterClientQuotasRequest, AlterClientQuotasResponse, (0, 1)
        ),
        ApiSpec(55, "DescribeQuorum", DescribeQuorumRequest, DescribeQuorumResponse, (0, 2)),
        ApiSpec(60, "DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, (0, 2)),
        # Security (node/security/kafka_gate.py answers these). SaslHandshake v1 only
        # (v0 would be followed by unframed SASL tokens), advertised from v0 because
        # librdkafka enables SASL only when a broker lists v0.
        ApiSpec(
            17,
            "SaslHandshake",
            SaslHandshakeRequest,
            SaslHandshakeResponse,
            (1, 1),
            advertised_min=0,
        ),
        ApiSpec(29, "DescribeAcls", DescribeAclsRequest, DescribeAclsResponse, (1, 3)),
        ApiSpec(30, "CreateAcls", CreateAclsRequest, CreateAclsResponse, (1, 3)),
        ApiSpec(31, "DeleteAcls", DeleteAclsRequest, DeleteAclsResponse, (1, 3)),
        ApiSpec(36, "SaslAuthenticate", SaslAuthenticateRequest, SaslAuthenticateResponse, (0, 2)),
        ApiSpec(
            50,
            "DescribeUserScramCredentials",
            DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse,
            (0, 0),
        ),
        ApiSpec(
            51,
            "AlterUserScramCredentials",
            AlterUserScramCredentialsRequest,
            AlterUserScramCredentialsResponse,
            (0, 0),
        ),
        # KIP-848 (node/groups/consumer_group.py); v1: the consumer makes its member id.
        ApiSpec(
            68,
            "ConsumerGroupHeartbeat",
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupHeartbeatResponse,
            (0, 1),
        ),
        ApiSpec(
            69,
            "ConsumerGroupDescribe",
            ConsumerGroupDescribeRequest,
            ConsumerGroupDescribeResponse,
            (0, 1),
        ),
        # KIP-714 (node/kafka/telemetry.py): not listed, as by a Kafka broker without a
        # client-metrics receiver plugin.
        ApiSpec(
            71,
            "GetTelemetrySubscriptions",
            GetTelemetrySubscriptionsRequest,
            GetTelemetrySubscriptionsResponse,
            (0, 0),
            listed=False,
        ),
    )
}


class InvalidRequestError(Exception):
    """A frame that cannot be answered: the connection is closed, as Kafka does."""


@dataclass
class KafkaRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the decoded request; None for an ApiVersions above our range
    size: int  # bytes in the frame
    client_host: str = ""  # the peer's address (the group coordinator records it)
    received_s: float = 0.0  # perf_counter() when its frame was read (its queue time)
    throttle_ms: int = 0  # a client quota's throttle: the connection is muted this long

    @property
    def spec(self) -> ApiSpec:
        return APIS[self.api_key]

    def flexible(self) -> bool:
        return bool(self.spec.request.flexible_version_q(self.api_version))


def parse_request(frame: bytes | bytearray | memoryview) -> KafkaRequest:
    """Decode one request frame (without its 4-byte size). Raises InvalidRequestError
    for anything the connection should be closed over: a truncated header, an unknown
    API key, a version we do not serve (except ApiVersions, which then gets a v0 error
    answer), a body that does not decode."""
    data = bytes(frame)
    if len(data) < _HEADER.size:
        raise InvalidRequestError(f"request header truncated ({len(data)} bytes)")
    api_key, api_version, correlation_id = _HEADER.unpack_from(data)
    spec = APIS.get(api_key)
    if spec is None:
        raise InvalidRequestError(f"unknown API key {api_key}")
    low, high = spec.served
    if api_key == API_VERSIONS and api_version > high:
        # KIP-511: answer with our ranges at v0, whatever the body holds.
        return KafkaRequest(api_key, api_version, correlation_id, None, None, len(data))
    if not low <= api_version <= high:
        raise InvalidRequestError(
            f"{spec.name} v{api_version} is not supported (served: v{low}-v{high})"
        )
    try:
        _, _, _, client_id, at = hot_codec.parse_header(data, _flexible(spec, api_version))
        body = _decode_body(spec, api_version, memoryview(data)[at:])
    except InvalidRequestError:
        raise
    except Exception as e:  # noqa: BLE001 - generated decoders raise anything on bad input
        raise InvalidRequestError(
            f"malformed {spec.name} v{api_version} request: {type(e).__name__}: {e}"
        ) from None
    return KafkaRequest(api_key, api_version, correlation_id, client_id, body, len(data))


_FLEXIBLE: dict[tuple[int, int], bool] = {}


def _flexible(spec: ApiSpec, version: int) -> bool:
    """Whether the API's version is flexible (request header v2), asked of kafka-python
    once per API and version."""
    known = _FLEXIBLE.get((spec.key, version))
    if known is None:
        known = _FLEXIBLE[(spec.key, version)] = bool(spec.request.flexible_version_q(version))
    return known


def _decode_body(spec: ApiSpec, version: int, body: memoryview) -> Any:
    """The hot APIs through node/kafka/hot_codec.py, the others through kafka-python."""
    if spec.key == PRODUCE:
        return hot_codec.decode_produce_request(body, version)
    if spec.key == FETCH and hot_codec.FETCH_FLEXIBLE[0] <= version <= hot_codec.FETCH_FLEXIBLE[1]:
        return hot_codec.decode_fetch_request(body, version)
    return spec.request.decode(body, version=version)


def response_header(request: KafkaRequest) -> bytes:
    """Response header v0 (correlation id), or v1 (plus empty tagged fields) for a
    flexible version; ApiVersions always answers with v0 (KIP-511)."""
    if request.api_key != API_VERSIONS and request.flexible():
        return _INT32.pack(request.correlation_id) + b"\x00"
    return _INT32.pack(request.correlation_id)


def response_class(request: KafkaRequest) -> Any:
    """The response class of the request's API at its version."""
    return request.spec.response[request.api_version]


def encode_response(request: KafkaRequest, body: Any, version: int | None = None) -> list[Part]:
    """One response frame: size, header, body. `body` is an instance of the response
    class; `version` overrides the request's (an ApiVersions error answer is v0)."""
    encoded = bytes(body.encode(version=request.api_version if version is None else version))
    header = response_header(request)
    return [_INT32.pack(len(header) + len(encoded)) + header + encoded]


def partition_errors(
    topics: Any, topic_cls: Any, part_cls: Any, code: Callable[[str, int], int]
) -> list[Any]:
    """An error-per-partition answer's topics (OffsetCommit's, TxnOffsetCommit's): every
    requested partition, in request order, with `code(topic, partition)` as its error."""
    return [
        topic_cls(
            name=t.name,
            partitions=[
                part_cls(
                    partition_index=p.partition_index, error_code=code(t.name, p.partition_index)
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def placeholder() -> bytes:
    """A record-set stand-in for a FileSlice: random, so it never occurs in the rest
    of the response by chance."""
    return b"\xfeSEGLOG" + os.urandom(9)


def _length_prefix(size: int, flexible: bool) -> bytes:
    """A records field's length: INT32 before flexible versions, else compact
    (unsigned varint of length + 1)."""
    return hot_codec.uvarint(size + 1) if flexible else _INT32.pack(size)


def encode_with_slices(
    request: KafkaRequest, body: Any, slices: dict[bytes, FileSlice]
) -> list[Part]:
    """As encode_response, with each placeholder (and the length before it) replaced
    by its FileSlice and the slice's own length."""
    if not slices:
        return encode_response(request, body)
    encoded = bytes(body.encode(version=request.api_version))
    flexible = request.flexible()
    header = response_header(request)
    parts: list[Part] = []
    total = len(header)
    pos = 0
    found = sorted((encoded.index(token), token) for token in slices)
    placeholder_prefix = len(_length_prefix(len(next(iter(slices))), flexible))
    for at, token in found:
        start = at - placeholder_prefix
        if start < pos or encoded[start:at] != _length_prefix(len(token), flexible):
            raise AssertionError("records placeholder not where the codec put it")
        piece = slices[token]
        chunk = encoded[pos:start] + _length_prefix(len(piece), flexible)
        parts.append(chunk)
        parts.append(piece)
        total += len(chunk) + len(piece)
        pos = at + len(token)
    tail = encoded[pos:]
    parts.append(tail)
    total += len(tail)
    parts[0] = _INT32.pack(total) + header + parts[0]  # type: ignore[operator]
    return parts
