"""Cluster administration, shaped like kafka-python's KafkaAdminClient: topics,
topic configs, cluster description, offset look-ups and consumer groups.

Error policy: a per-topic error the node returns is raised as the matching
KafkaError subclass (`for_code`) carrying the node's message. Batch calls
(`create_topics`, `delete_topics`) send the whole batch, then raise the error of
the first failed topic (in request order); the exception also carries
`.topic` (that topic's name), `.errors` (every failed topic → its error) and
`.results` (every topic that succeeded), so a caller can see exactly what
happened to the rest of the batch. When nothing fails they return the results.

Transport failures (a node that is down or restarting) and NOT_CONTROLLER are
retried against any reachable node until `request_timeout_ms` has passed; then
the last error is raised (NoBrokersAvailable names the addresses it tried).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2, groups_pb2_grpc
from seglog.proto import groups_pb2 as gpb

from .cluster import ClusterMetadata, Connections, TopicPartition, call
from .consumer_protocol import Subscription, decode_assignment, decode_subscription
from .errors import (
    BootstrapUnreachable,
    KafkaError,
    NoBrokersAvailable,
    NodeNotReadyError,
    error_class,
    for_code,
)
from .group_coordinator import OffsetAndMetadata
from .security import ClientSecurity

T = TypeVar("T")
_log = logging.getLogger(__name__)

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

_RETRY_BACKOFF_S = 0.1
_MAX_RETRY_BACKOFF_S = 1.0


@dataclass(frozen=True, slots=True)
class NewTopic:
    """kafka-python's NewTopic: -1 means the node's num.partitions /
    default.replication.factor."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    """kafka-python's NewPartitions: the topic's partition count after the change."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A running reassignment (KIP-455): replicas = target + removing_replicas."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]
    is_internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: int  # Kafka's DescribeConfigs source ids: 1 topic, 4 static broker, 5 default
    is_default: bool
    read_only: bool = False
    is_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


@dataclass(frozen=True, slots=True)
class OffsetResult:
    """One partition's ListOffsets answer; offset -1: no record at or after the timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead


@dataclass(frozen=True, slots=True)
class MemberInformation:
    """kafka-python's MemberInformation, the consumer protocol bytes decoded
    (None when a member's bytes are not the consumer protocol's)."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: Subscription | None
    member_assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupInformation:
    """kafka-python's GroupInformation, with the coordinator that answered."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberInformation, ...]
    coordinator: BrokerDescription | None = None


class _StaleLeadership(Exception):
    """Inside an attempt: a partition's leader moved or is being elected; refresh
    metadata and try again. Carries the error to raise if time runs out."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def _topic_error(name: str, code: int, message: str) -> KafkaError:
    # Node messages usually name the topic already; config errors do not.
    if repr(name) not in message:
        message = f"topic {name!r}: {message}" if message else f"topic {name!r}"
    return for_code(code, message)


def _raise_batch(
    errors: dict[str, KafkaError], results: Mapping[str, object], order: Sequence[str]
) -> None:
    if not errors:
        return
    first = next(n for n in order if n in errors)
    exc = errors[first]
    exc.topic = first  # type: ignore[attr-defined]
    exc.errors = dict(errors)  # type: ignore[attr-defined]
    exc.results = dict(results)  # type: ignore[attr-defined]
    raise exc


class Admin:
    """`Admin(bootstrap_servers="127.0.0.1:9192")`; thread-safe; `close()` when done
    (or use it as a context manager)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9192",
        request_timeout_ms: int = 30_000,
        client_id: str = "seglog-admin",
        metadata_max_age_ms: int = 300_000,
        **security: str | None,
    ) -> None:
        client_security = ClientSecurity.from_options(security)
        if request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be positive, got {request_timeout_ms}")
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            Connections(client_security),
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._closed = False

    # --- plumbing --------------------------------------------------------------------

    def _retrying(self, attempt: Callable[[float], T]) -> T:
        """Run `attempt(timeout_s)` until it succeeds, fails for good, or the request
        timeout passes. Only failures that say nothing about the request itself
        (unreachable node, not the controller, a moved leader) are retried."""
        if self._closed:
            raise KafkaError("the admin client is closed")
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        backoff = _RETRY_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                return attempt(max(remaining, 0.001))
            except BootstrapUnreachable:
                raise  # no seglog node at any bootstrap address: waiting will not help
            except (NoBrokersAvailable, NodeNotReadyError) as e:
                last: KafkaError = e
            except _StaleLeadership as e:
                last = e.error
            self._metadata.request_update()
            remaining = deadline - time.monotonic()
            if remaining <= backoff:
                raise self._give_up(last)
            _log.info("retrying in %.1fs (%.1fs left): %s", backoff, remaining, last)
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_RETRY_BACKOFF_S)

    def _give_up(self, last: KafkaError) -> KafkaError:
        if isinstance(last, NoBrokersAvailable | NodeNotReadyError):
            addresses = ", ".join(f"{h}:{p}" for h, p in self._metadata.bootstrap)
            detail = str(last.args[0]) if last.args else ""
            return NoBrokersAvailable(
                f"cannot reach {addresses} within {self.request_timeout_ms} ms"
                + (f" ({_short_detail(detail)})" if detail else "")
            )
        return last

    def _stub(self, controller: bool) -> client_pb2_grpc.SegLogStub:
        """The controller's stub (admin writes go there, as in Kafka), else any node."""
        if self._metadata.stale():
            self._metadata.refresh([])
        if controller:
            address = self._metadata.address(self._metadata.controller_id)
            if address is not None:
                return self._metadata.connections.stub(address)
        return self._metadata.any_stub()

    def _rpc(
        self,
        method: str,
        request: object,
        codes: Callable[[Any], Iterable[int]],
        controller: bool = True,
    ) -> Any:
        """One admin RPC. `codes` lists the response's per-item error codes: a node
        that is not the controller (any more) means refresh and resend."""
        not_controller = errors_pb2.ErrorCode.Value("NOT_CONTROLLER")

        def attempt(timeout_s: float) -> Any:
            stub = self._stub(controller)
            response = call(getattr(stub, method), request, timeout_s)
            if not_controller in set(codes(response)):
                raise _StaleLeadership(
                    for_code(not_controller, f"{method} reached a non-controller")
                )
            return response

        return self._retrying(attempt)

    # --- topics ----------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> dict[str, CreateTopicResult]:
        """Create every topic it can; raise the first topic's error if any failed
        (see the module docstring). `validate_only`: check, create nothing."""
        request = pb.CreateTopicsRequest(
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
            validate_only=validate_only,
        )
        for t in new_topics:
            request.topics.add(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs={str(k): str(v) for k, v in t.topic_configs.items()},
            )
        response: pb.CreateTopicsResponse = self._rpc(
            "CreateTopics", request, lambda r: [t.error_code for t in r.topics]
        )
        results: dict[str, CreateTopicResult] = {}
        errors: dict[str, KafkaError] = {}
        for r in response.topics:
            if r.error_code:
                errors[r.name] = _topic_error(r.name, r.error_code, r.error_message)
            else:
                results[r.name] = CreateTopicResult(
                    r.name, r.topic_id, r.num_partitions, r.replication_factor
                )
        self._metadata.request_update()
        _raise_batch(errors, results, [t.name for t in new_topics])
        return results

    def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> list[str]:
        """Raise each topic's partition count to its NewPartitions.total_count (kafka-
        python's shape); the topics changed. Raises like create_topics."""
        request = pb.CreateTopicPartitionsRequest(
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
            validate_only=validate_only,
        )
        for name, new in topic_partitions.items():
            if new.new_assignments is not None:
                raise ValueError(
                    f"{name}: new_assignments is not supported; the controller places "
                    f"the new partitions' replicas"
                )
            request.topics.add(name=name, count=new.total_count)
        response: pb.CreateTopicPartitionsResponse = self._rpc(
            "CreatePartitions", request, lambda r: [t.error_code for t in r.results]
        )
        return self._names_done(response.results, list(topic_partitions))

    def perform_leader_election(
        self,
        election_type: int | str,
        topic_partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, str]:
        """KIP-460 (kafka-python's shape; election_type 0 or "preferred", 1 or
        "unclean"); None: every partition that needs one. Per partition the outcome by
        Kafka's error name: NONE (elected), ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION. A request the controller refuses as a whole raises."""
        names = {0: "preferred", 1: "unclean"}
        election = (
            names.get(election_type)
            if isinstance(election_type, int)
            else str(election_type).lower()
        )
        if election not in names.values():
            raise ValueError(
                f"election_type must be preferred (0) or unclean (1), not {election_type!r}"
            )
        by_topic: dict[str, list[int]] = {}
        for tp in topic_partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if topic_partitions is not None and not by_topic:
            return {}
        request = pb.ElectLeadersRequest(
            election_type=election,
            topics=[pb.ElectLeadersTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
        )
        response: pb.ElectLeadersResponse = self._rpc(
            "ElectLeaders", request, lambda r: [r.error_code]
        )
        if response.error_code:
            raise for_code(response.error_code, response.error_message or "ElectLeaders failed")
        self._metadata.request_update()
        return {
            TopicPartition(r.topic, r.partition): errors_pb2.ErrorCode.Name(r.error_code)
            for r in response.results
        }

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, tuple[str, str]]:
        """KIP-455: move each partition to its target replicas (the first is the
        preferred leader), or cancel its running reassignment (None). Per partition
        (Kafka's error name, message): NONE, INVALID_REPLICA_ASSIGNMENT,
        NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION. The moves go on in
        the background; list_partition_reassignments shows the running ones. A
        request the controller refuses as a whole raises."""
        request = pb.AlterPartitionReassignmentsRequest(
            partitions=[
                pb.PartitionReassignment(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=() if target is None else list(target),
                    cancel=target is None,
                )
                for tp, target in reassignments.items()
            ],
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
        )
        if not request.partitions:
            return {}
        response: pb.AlterPartitionReassignmentsResponse = self._rpc(
            "AlterPartitionReassignments", request, lambda r: [r.error_code]
        )
        if response.error_code:
            raise for_code(
                response.error_code, response.error_message or "AlterPartitionReassignments failed"
            )
        self._metadata.request_update()
        return {
            TopicPartition(r.topic, r.partition): (
                errors_pb2.ErrorCode.Name(r.error_code),
                r.error_message,
            )
            for r in response.results
        }

    def list_partition_reassignments(
        self, topic_partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The running reassignments among the partitions (None: all of them)."""
        request = pb.ListPartitionReassignmentsRequest(
            partitions=[
                pb.PartitionReassignment(topic=tp.topic, partition=tp.partition)
                for tp in topic_partitions or ()
            ],
            all_partitions=topic_partitions is None,
        )
        response: pb.ListPartitionReassignmentsResponse = self._rpc(
            "ListPartitionReassignments", request, lambda r: [r.error_code], controller=False
        )
        if response.error_code:
            raise for_code(response.error_code, response.error_message)
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
            )
            for r in response.reassignments
        }

    def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> list[str]:
        """Delete the topics; the names deleted. Raises like create_topics."""
        request = pb.DeleteTopicsRequest(
            names=list(topics),
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
        )
        response: pb.DeleteTopicsResponse = self._rpc(
            "DeleteTopics", request, lambda r: [t.error_code for t in r.topics]
        )
        return self._names_done(response.topics, list(topics))

    def _names_done(self, results: Iterable[Any], asked: list[str]) -> list[str]:
        """Per-topic results (name, error_code, error_message) of a batch call: the
        names that succeeded; raises like create_topics if any failed."""
        done: dict[str, str] = {}
        errors: dict[str, KafkaError] = {}
        for r in results:
            if r.error_code:
                errors[r.name] = _topic_error(r.name, r.error_code, r.error_message)
            else:
                done[r.name] = r.name
        self._metadata.request_update()
        _raise_batch(errors, done, asked)
        return list(done)

    def list_topics(self) -> list[str]:
        """Every topic name, sorted."""
        response = self._retrying(lambda _t: self._metadata.refresh(None))
        return sorted(t.name for t in response.topics if not t.error_code)

    def describe_topics(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> list[TopicDescription]:
        """Descriptions of the named topics (all when None), in the order asked
        (sorted by name for all); an unknown topic raises UnknownTopicOrPartitionError.
        `allow_auto_topic_creation`: let the node create missing topics as a
        producer's metadata request would (when auto.create.topics.enable)."""
        names = None if topics is None else list(topics)
        if names is not None and not names:
            return []
        response = self._retrying(
            lambda _t: self._metadata.refresh(names, allow_auto_topic_creation)
        )
        by_name = {t.name: t for t in response.topics}
        out = []
        for name in names if names is not None else sorted(by_name):
            t = by_name.get(name)
            if t is None:
                raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(f"topic {name!r} does not exist")
            if t.error_code:
                raise _topic_error(name, t.error_code, t.error_message)
            out.append(
                TopicDescription(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=tuple(
                        PartitionDescription(
                            partition=p.partition,
                            leader=p.leader_id,
                            leader_epoch=p.leader_epoch,
                            replicas=tuple(p.replica_nodes),
                            isr=tuple(p.isr_nodes),
                            offline_replicas=tuple(p.offline_replicas),
                        )
                        for p in sorted(t.partitions, key=lambda p: p.partition)
                    ),
                    is_internal=t.name.startswith("__"),
                )
            )
        return out

    # --- configs ---------------------------------------------------------------------

    def describe_configs(
        self, topic: str, config_names: Iterable[str] | None = None
    ) -> dict[str, ConfigEntry]:
        """The topic's effective configs (every setting unless `config_names`)."""
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.TOPIC, name=topic, config_names=list(config_names or []))
        response: pb.DescribeConfigsResponse = self._rpc(
            "DescribeConfigs", request, lambda r: [x.error_code for x in r.results], False
        )
        result = response.results[0]
        if result.error_code:
            raise _topic_error(topic, result.error_code, result.error_message)
        return {
            c.name: ConfigEntry(
                c.name, c.value, c.source, c.is_default, c.read_only, c.is_sensitive
            )
            for c in result.configs
        }

    def describe_configs_of(
        self, topics: Sequence[str], config_names: Iterable[str] | None = None
    ) -> dict[str, dict[str, ConfigEntry] | KafkaError]:
        """Several topics' configs in one request (Kafka's describeConfigs of many
        resources): per topic its configs, or the error the node gave for it."""
        request = pb.DescribeConfigsRequest()
        names = list(config_names or [])
        for topic in topics:
            request.resources.add(type=pb.TOPIC, name=topic, config_names=names)
        response: pb.DescribeConfigsResponse = self._rpc(
            "DescribeConfigs", request, lambda r: [x.error_code for x in r.results], False
        )
        by_name = {r.name: r for r in response.results}
        out: dict[str, dict[str, ConfigEntry] | KafkaError] = {}
        for topic in topics:
            result = by_name.get(topic)
            if result is None:
                out[topic] = KafkaError(f"DescribeConfigs did not answer for topic {topic!r}")
                continue
            if result.error_code:
                out[topic] = _topic_error(topic, result.error_code, result.error_message)
                continue
            out[topic] = {
                c.name: ConfigEntry(
                    c.name, c.value, c.source, c.is_default, c.read_only, c.is_sensitive
                )
                for c in result.configs
            }
        return out

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Incremental alter (Kafka's incrementalAlterConfigs): set some overrides,
        remove others (they fall back to the broker default); the rest stay."""
        result = self._alter_configs(pb.TOPIC, topic, set, delete, validate_only)
        if result.error_code:
            raise _topic_error(topic, result.error_code, result.error_message)

    def _alter_configs(
        self,
        resource_type: int,
        name: str,
        set: Mapping[str, str] | None,
        delete: Iterable[str],
        validate_only: bool,
    ) -> Any:
        """One resource's incremental AlterConfigs; its result (error code and message)."""
        changes = {str(k): str(v) for k, v in (set or {}).items()}
        removed = list(delete)
        both = sorted(changes.keys() & removed)
        if both:
            raise ValueError(f"config {both[0]!r} is both set and deleted")
        if not changes and not removed:
            raise ValueError("nothing to alter: give configs to set or delete")
        request = pb.AlterConfigsRequest(validate_only=validate_only)
        resource = request.resources.add(type=resource_type, name=name)
        for key, value in changes.items():
            resource.configs.add(name=key, op=pb.SET, value=value)
        for key in removed:
            resource.configs.add(name=key, op=pb.DELETE)
        response: pb.AlterConfigsResponse = self._rpc(
            "AlterConfigs", request, lambda r: [x.error_code for x in r.results]
        )
        return response.results[0]

    def describe_broker_configs(self, broker: str) -> dict[str, ConfigEntry]:
        """A broker's configs (KIP-226): its dynamic ones (source 1), the cluster-wide
        dynamic defaults (2) and, asked of that broker itself, its static properties
        (4); `broker` "" is the cluster-wide default alone."""
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.BROKER, name=broker)

        def attempt(timeout_s: float) -> Any:
            if self._metadata.stale():
                self._metadata.refresh([])
            address = self._metadata.address(int(broker)) if broker.isdigit() else None
            stub = (
                self._metadata.connections.stub(address)
                if address is not None
                else self._metadata.any_stub()
            )
            return call(stub.DescribeConfigs, request, timeout_s)

        response: pb.DescribeConfigsResponse = self._retrying(attempt)
        result = response.results[0]
        if result.error_code:
            raise for_code(result.error_code, result.error_message)
        return {
            c.name: ConfigEntry(
                c.name, c.value, c.source, c.is_default, c.read_only, c.is_sensitive
            )
            for c in result.configs
        }

    def alter_broker_configs(
        self,
        broker: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Dynamic broker configs (KIP-226) of one broker (its id) or of every broker
        (""), taking effect without a restart."""
        result = self._alter_configs(pb.BROKER, broker, set, delete, validate_only)
        if result.error_code:
            raise for_code(result.error_code, result.error_message)

    # --- cluster and offsets -----------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        response = self._retrying(lambda _t: self._metadata.refresh([]))
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=tuple(
                BrokerDescription(b.node_id, b.host, b.port, b.fenced) for b in response.brokers
            ),
        )

    def list_offsets(
        self, specs: Mapping[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, OffsetResult]:
        """Kafka's Admin.listOffsets: per partition a timestamp in ms, or
        LATEST_TIMESTAMP / EARLIEST_TIMESTAMP / MAX_TIMESTAMP. Asks each partition's
        leader; leadership changes are retried until the request timeout."""
        if not specs:
            return {}
        pending = dict(specs)
        out: dict[TopicPartition, OffsetResult] = {}

        def attempt(timeout_s: float) -> None:
            self._metadata.refresh({tp.topic for tp in pending})
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                error = self._metadata.topic_error(tp.topic)
                if error is not None:
                    raise type(error)(*error.args)
                info = self._metadata.partition(tp)
                if info is None:
                    raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(
                        f"partition {tp.topic}-{tp.partition} does not exist"
                    )
                if info.leader < 0:
                    raise _StaleLeadership(
                        error_class("LEADER_NOT_AVAILABLE")(
                            f"partition {tp.topic}-{tp.partition} has no leader"
                        )
                    )
                by_leader.setdefault(info.leader, []).append(tp)
            retry: KafkaError | None = None
            for leader, tps in by_leader.items():
                request = pb.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level)
                for topic in sorted({tp.topic for tp in tps}):
                    t = request.topics.add(name=topic)
                    for tp in tps:
                        if tp.topic == topic:
                            t.partitions.add(
                                partition=tp.partition,
                                current_leader_epoch=-1,
                                timestamp=pending[tp],
                            )
                response = call(self._metadata.stub_for(leader).ListOffsets, request, timeout_s)
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition)
                        if p.error_code:
                            error = _topic_error(t.name, p.error_code, p.error_message)
                            if not error.invalid_metadata:
                                raise error
                            retry = error
                            continue
                        out[tp] = OffsetResult(p.offset, p.timestamp, p.leader_epoch)
                        pending.pop(tp, None)
            if retry is not None:
                raise _StaleLeadership(retry)

        self._retrying(attempt)
        return out

    # --- consumer groups -------------------------------------------------------------------

    def _group_stub(self, address: tuple[str, int]) -> groups_pb2_grpc.GroupCoordinatorStub:
        return self._metadata.connections.group_stub(address)

    def _find_coordinator(self, group_id: str, timeout_s: float) -> BrokerDescription:
        """The group's coordinator; while it is being elected or loaded, retried."""
        if self._metadata.stale():
            self._metadata.refresh([])
        known = self._metadata.broker_addresses()
        stub = self._group_stub(random.choice(known) if known else self._metadata.bootstrap[0])
        r = call(stub.FindCoordinator, gpb.FindCoordinatorRequest(key=group_id), timeout_s)
        if r.error_code:
            error = for_code(r.error_code, f"group {group_id!r}: {r.error_message}")
            if error.retriable:
                raise _StaleLeadership(error)
            raise error
        return BrokerDescription(r.node_id, r.host, r.port)

    def _on_coordinator(
        self, group_id: str, attempt: Callable[[groups_pb2_grpc.GroupCoordinatorStub, float], T]
    ) -> T:
        """Run `attempt(stub, timeout_s)` against the group's coordinator, finding it
        again when it moved (NOT_COORDINATOR, ...) until the request timeout."""

        def once(timeout_s: float) -> T:
            c = self._find_coordinator(group_id, timeout_s)
            return attempt(self._group_stub((c.host, c.port)), timeout_s)

        return self._retrying(once)

    @staticmethod
    def _group_error(code: int, what: str) -> KafkaError:
        error = for_code(code, what)
        if code in (
            errors_pb2.ErrorCode.Value("NOT_COORDINATOR"),
            errors_pb2.ErrorCode.Value("COORDINATOR_NOT_AVAILABLE"),
            errors_pb2.ErrorCode.Value("COORDINATOR_LOAD_IN_PROGRESS"),
        ):
            raise _StaleLeadership(error)
        return error

    def list_consumer_groups(self, states_filter: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of every node (each coordinates some), sorted by id; with
        `states_filter`, only groups in those states."""
        request = gpb.ListGroupsRequest(states_filter=list(states_filter))

        def attempt(timeout_s: float) -> list[GroupListing]:
            self._metadata.refresh([])
            addresses = self._metadata.broker_addresses()
            found: dict[str, GroupListing] = {}
            for address in addresses:
                r = call(self._group_stub(address).ListGroups, request, timeout_s)
                if r.error_code:
                    error = self._group_error(r.error_code, f"ListGroups on {address}")
                    raise error
                for g in r.groups:
                    found[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state)
            return [found[k] for k in sorted(found)]

        return self._retrying(attempt)

    def describe_consumer_groups(self, group_ids: Sequence[str]) -> list[GroupInformation]:
        """Each group's state, assignor and members (with their decoded subscription
        and assignment), in the order asked. A group that does not exist is
        described as state Dead, as Kafka does."""
        out = []
        for group_id in group_ids:

            def attempt(
                stub: groups_pb2_grpc.GroupCoordinatorStub,
                timeout_s: float,
                group_id: str = group_id,
            ) -> GroupInformation:
                r = call(
                    stub.DescribeGroups, gpb.DescribeGroupsRequest(groups=[group_id]), timeout_s
                )
                g = next((g for g in r.groups if g.group_id == group_id), None)
                if g is None:
                    raise KafkaError(f"DescribeGroups did not answer for group {group_id!r}")
                if g.error_code:
                    raise self._group_error(g.error_code, f"group {group_id!r}")
                members = []
                for m in g.members:
                    try:
                        sub: Subscription | None = decode_subscription(m.member_metadata)
                    except ValueError:
                        sub = None
                    try:
                        assigned = tuple(decode_assignment(m.member_assignment))
                    except ValueError:
                        assigned = ()
                    members.append(
                        MemberInformation(
                            m.member_id,
                            m.client_id,
                            m.client_host,
                            sub,
                            assigned,
                            m.group_instance_id or None,
                        )
                    )
                coordinator = self._find_coordinator(group_id, timeout_s)
                return GroupInformation(
                    g.error_code,
                    g.group_id,
                    g.group_state,
                    g.protocol_type,
                    g.protocol_data,
                    tuple(members),
                    coordinator,
                )

            out.append(self._on_coordinator(group_id, attempt))
        return out

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of `partitions`, or all it has committed);
        partitions without a committed offset are left out."""
        request = gpb.OffsetFetchRequest(group_id=group_id, all_topics=partitions is None)
        if partitions is not None:
            tps = list(partitions)
            for topic in sorted({tp.topic for tp in tps}):
                request.topics.add(
                    name=topic,
                    partition_indexes=sorted(tp.partition for tp in tps if tp.topic == topic),
                )

        def attempt(
            stub: groups_pb2_grpc.GroupCoordinatorStub, timeout_s: float
        ) -> dict[TopicPartition, OffsetAndMetadata]:
            r = call(stub.OffsetFetch, request, timeout_s)
            if r.error_code:
                raise self._group_error(r.error_code, f"offsets of group {group_id!r}")
            found = {}
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise self._group_error(
                            p.error_code, f"group {group_id!r} {t.name}-{p.partition_index}"
                        )
                    if p.committed_offset >= 0:
                        found[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata, p.committed_leader_epoch
                        )
            return found

        return self._on_coordinator(group_id, attempt)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit these offsets for the group from outside it (generation -1): the
        coordinator refuses while the group has members (UNKNOWN_MEMBER_ID). Raises
        the first partition's error; the exception's `.errors` has them all."""
        values = {
            tp: (om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om)))
            for tp, om in offsets.items()
        }
        request = gpb.OffsetCommitRequest(group_id=group_id, generation_id=-1, member_id="")
        for topic in sorted({tp.topic for tp in values}):
            t = request.topics.add(name=topic)
            for tp in sorted((tp for tp in values if tp.topic == topic), key=lambda x: x.partition):
                om = values[tp]
                t.partitions.add(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )

        def attempt(stub: groups_pb2_grpc.GroupCoordinatorStub, timeout_s: float) -> None:
            r = call(stub.OffsetCommit, request, timeout_s)
            errors: dict[str, KafkaError] = {}
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        where = f"{t.name}-{p.partition_index}"
                        errors[where] = self._group_error(
                            p.error_code, f"commit of {where} for group {group_id!r}"
                        )
            order = [f"{tp.topic}-{tp.partition}" for tp in values]
            _raise_batch(errors, {}, order)

        self._on_coordinator(group_id, attempt)
        return values

    def delete_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> list[tuple[str, KafkaError | None]]:
        """Delete the groups (each must have no members: NON_EMPTY_GROUP otherwise);
        (group_id, error or None) per group, as kafka-python returns them."""
        out: list[tuple[str, KafkaError | None]] = []
        for group_id in group_ids:

            def attempt(
                stub: groups_pb2_grpc.GroupCoordinatorStub,
                timeout_s: float,
                group_id: str = group_id,
            ) -> KafkaError | None:
                r = call(
                    stub.DeleteGroups, gpb.DeleteGroupsRequest(groups_names=[group_id]), timeout_s
                )
                for result in r.results:
                    if result.group_id == group_id and result.error_code:
                        return self._group_error(result.error_code, f"group {group_id!r}")
                return None

            out.append((group_id, self._on_coordinator(group_id, attempt)))
        return out

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Kafka's OffsetDelete: forget the group's committed offsets of these
        partitions (refused for topics the group is subscribed to)."""
        tps = list(partitions)
        request = gpb.OffsetDeleteRequest(group_id=group_id)
        for topic in sorted({tp.topic for tp in tps}):
            request.topics.add(
                name=topic,
                partition_indexes=sorted(tp.partition for tp in tps if tp.topic == topic),
            )

        def attempt(
            stub: groups_pb2_grpc.GroupCoordinatorStub, timeout_s: float
        ) -> dict[TopicPartition, KafkaError | None]:
            r = call(stub.OffsetDelete, request, timeout_s)
            if r.error_code:
                raise self._group_error(r.error_code, f"group {group_id!r}")
            result: dict[TopicPartition, KafkaError | None] = {tp: None for tp in tps}
            for t in r.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        result[tp] = self._group_error(
                            p.error_code, f"group {group_id!r} {t.name}-{p.partition_index}"
                        )
            return result

        return self._on_coordinator(group_id, attempt)

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._metadata.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _short_detail(detail: str) -> str:
    """gRPC's connect errors are long; keep the part that says why."""
    for marker, short in (
        ("Connection refused", "connection refused"),
        ("Domain name not found", "host name not found"),
        ("Name or service not known", "host name not found"),
        ("No route to host", "no route to host"),
        ("Deadline Exceeded", "no answer"),
    ):
        if marker in detail:
            return short
    return detail


KafkaAdminClient = Admin

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "Admin",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "CreateTopicResult",
    "GroupInformation",
    "GroupListing",
    "MemberInformation",
    "OffsetAndMetadata",
    "KafkaAdminClient",
    "NewTopic",
    "OffsetResult",
    "PartitionDescription",
    "TopicDescription",
]
