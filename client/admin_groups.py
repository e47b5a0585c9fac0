"""The Admin's consumer group operations, each run against the group's
coordinator (found again when it moves): list, describe and delete groups, and
list, alter and delete their committed offsets."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from seglog.proto import errors_pb2, groups_pb2_grpc
from seglog.proto import groups_pb2 as gpb

from .admin_requests import AdminRequests, StaleLeadership, raise_batch
from .admin_types import BrokerDescription, GroupInformation, GroupListing, MemberInformation
from .cluster import TopicPartition, call
from .consumer_protocol import Subscription, decode_assignment, decode_subscription
from .errors import KafkaError, for_code
from .group_coordinator import OffsetAndMetadata

T = TypeVar("T")


class GroupAdmin(AdminRequests):
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
                raise StaleLeadership(error)
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
            raise StaleLeadership(error)
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
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of `partitions`, or all it has committed);
        partitions without a committed offset are left out. With `require_stable`
        (Kafka's ListConsumerGroupOffsetsOptions.requireStable), an offset pending in an
        open transaction (UNSTABLE_OFFSET_COMMIT) is asked for again until it ends."""
        request = gpb.OffsetFetchRequest(
            group_id=group_id, all_topics=partitions is None, require_stable=require_stable
        )
        if partitions is not None:
            _add_partition_indexes(request.topics, partitions)

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
                        what = f"group {group_id!r} {t.name}-{p.partition_index}"
                        if p.error_code == errors_pb2.ErrorCode.Value("UNSTABLE_OFFSET_COMMIT"):
                            raise StaleLeadership(for_code(p.error_code, what))
                        raise self._group_error(p.error_code, what)
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
            raise_batch(errors, {}, order)

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
        _add_partition_indexes(request.topics, tps)

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


def _add_partition_indexes(topics: Any, partitions: Iterable[TopicPartition]) -> None:
    """OffsetFetch's and OffsetDelete's request shape: per topic (sorted by name), its
    partition indexes (sorted)."""
    tps = list(partitions)
    for topic in sorted({tp.topic for tp in tps}):
        topics.add(
            name=topic, partition_indexes=sorted(tp.partition for tp in tps if tp.topic == topic)
        )
