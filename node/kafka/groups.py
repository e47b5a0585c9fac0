"""Kafka's group APIs on the Kafka listener: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
DeleteGroups, OffsetDelete and KIP-848's ConsumerGroupHeartbeat, each a thin
translation to the node's group coordinator (node/groups/) and back. A JoinGroup or
SyncGroup that must wait for the rest of the group is answered from a Deferred, so it
never holds a request handler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from seglog.storage.partition_metadata import topic_id_to_uuid

from ..groups.group_errors import NONE
from ..groups.group_messages import (
    CommitPartition,
    CommitResult,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
    DescribedGroup,
    FetchedOffset,
    JoinRequest,
    JoinResult,
    LeaveResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    Result,
    SyncRequest,
    SyncResult,
)
from ..groups.listener_results import (
    SYNC_TIMEOUT_S,
    commit_errors,
    commit_partitions,
    error_of,
    errors_by_topic,
    expected,
    join_timeout_s,
    offsets_by_topic,
    stable_only,
    wait_answer,
)
from ..security.acls import AclOperation, ResourceType
from ..security.group_acls import GROUP_DENIED, GuardedGroups, done_future
from ..security.kafka_gate import allowed, authorized_operations, caller_may
from ..security.node_authorizer import NodeAuthorizer
from . import group_configs
from .codec import KafkaRequest, Part, encode_response, partition_errors, response_class
from .errors import error_code
from .metadata import live_brokers
from .node_api import KafkaNode
from .socket_server import Deferred

UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
CONSUMER_MEMBER = 1  # ConsumerGroupDescribe v1's MemberType: 0 classic, 1 consumer
GROUP_KEY, TRANSACTION_KEY = 0, 1  # v6's share groups (2) are not served


def _code(result: Result) -> int:
    return error_code(error_of(result))


def _topic_ids(image: Any) -> dict[str, Any]:
    """Topic name → topic id (a UUID), for the topics whose id is one."""
    ids = {}
    for name, topic in image.topics.items():
        try:
            ids[name] = topic_id_to_uuid(topic.topic_id)
        except ValueError:
            continue
    return ids


class KafkaGroupApis:
    def __init__(
        self,
        node: KafkaNode,
        listener: str,
        authorizer: Callable[[], NodeAuthorizer | None] = lambda: None,
    ) -> None:
        self.node = node
        self.listener = listener
        self._authorizer = authorizer

    def _groups(self) -> Any:
        """The coordinator, behind Kafka's group ACLs when an authorizer is on."""
        authorizer = self._authorizer()
        if authorizer is None:
            return self.node.groups
        return GuardedGroups(self.node.groups, caller_may(authorizer))

    # --- FindCoordinator ------------------------------------------------------------

    def _coordinator(self, key: str, key_type: int) -> tuple[str, int, str, int, str | None]:
        """(error, node id, host, port, message) for one coordinator key."""
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            return "INVALID_REQUEST", -1, "", -1, f"key type {key_type} is not served"
        if not key:
            return "INVALID_REQUEST", -1, "", -1, "empty coordinator key"
        if key_type == TRANSACTION_KEY:
            resource = ResourceType.TRANSACTIONAL_ID
            if not allowed(self._authorizer(), AclOperation.DESCRIBE, resource, key):
                return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1, "", -1, None
            error, node_id = self.node.find_transaction_coordinator(key)
        elif not allowed(self._authorizer(), AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return GROUP_DENIED, -1, "", -1, None
        else:
            error, node_id = self.node.find_group_coordinator(key)
        if error != NONE:
            return error, -1, "", -1, None
        live = live_brokers(self.node.metadata_image(), self.listener)
        found = live.get(node_id)
        if found is None:
            return "COORDINATOR_NOT_AVAILABLE", -1, "", -1, None
        return NONE, node_id, found[1], found[2], None

    def find_coordinator(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        key_type = getattr(req, "key_type", GROUP_KEY) if request.api_version >= 1 else GROUP_KEY
        if request.api_version >= 4:
            coordinators = []
            for key in req.coordinator_keys:
                error, node_id, host, port, message = self._coordinator(key, key_type)
                coordinators.append(
                    cls.Coordinator(
                        key=key,
                        node_id=node_id,
                        host=host,
                        port=port,
                        error_code=error_code(error),
                        error_message=message,
                    )
                )
            return encode_response(request, cls(throttle_time_ms=0, coordinators=coordinators))
        error, node_id, host, port, message = self._coordinator(req.key, key_type)
        body = cls(
            throttle_time_ms=0,
            error_code=error_code(error),
            error_message=message,
            node_id=node_id,
            host=host,
            port=port,
        )
        return encode_response(request, body)

    # --- membership -----------------------------------------------------------------

    def join_group(self, request: KafkaRequest) -> Deferred:
        req = request.body
        v = request.api_version
        rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
        join = JoinRequest(
            req.group_id,
            req.member_id or "",
            (req.group_instance_id or None) if v >= 5 else None,
            req.session_timeout_ms,
            rebalance_timeout if rebalance_timeout > 0 else req.session_timeout_ms,
            req.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in req.protocols),
            v >= 4,
            request.client_id or "",
            "/" + request.client_host,
            supports_skip_assignment=v >= 9,
        )
        future = self._groups().join_group(join)
        timeout = join_timeout_s(self.node.groups.config, join)

        def refused(error: str) -> JoinResult:
            # Kafka answers a refused member with no member id.
            return JoinResult(error, member_id="" if error == GROUP_DENIED else join.member_id)

        def answer() -> list[Part]:
            cls = response_class(request)
            r = expected(wait_answer(future, timeout), JoinResult, refused)
            body = cls(
                throttle_time_ms=0,
                error_code=error_code(r.error),
                generation_id=r.generation,
                protocol_type=r.protocol_type,
                protocol_name=r.protocol_name if (r.protocol_name or v >= 7) else "",
                leader=r.leader,
                skip_assignment=r.skip_assignment,
                member_id=r.member_id,
                members=[
                    cls.JoinGroupResponseMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        metadata=m.metadata,
                    )
                    for m in r.members
                ],
            )
            return encode_response(request, body)

        return Deferred(answer)

    def sync_group(self, request: KafkaRequest) -> Deferred:
        req = request.body
        v = request.api_version
        sync = SyncRequest(
            req.group_id,
            req.generation_id,
            req.member_id,
            (req.group_instance_id or None) if v >= 3 else None,
            (req.protocol_type or None) if v >= 5 else None,
            (req.protocol_name or None) if v >= 5 else None,
            tuple((a.member_id, bytes(a.assignment)) for a in req.assignments),
        )
        future = self._groups().sync_group(sync)

        def answer() -> list[Part]:
            cls = response_class(request)
            r = expected(wait_answer(future, SYNC_TIMEOUT_S), SyncResult, SyncResult)
            body = cls(
                throttle_time_ms=0,
                error_code=error_code(r.error),
                protocol_type=r.protocol_type,
                protocol_name=r.protocol_name,
                assignment=r.assignment,
            )
            return encode_response(request, body)

        return Deferred(answer)

    def heartbeat(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        instance = (req.group_instance_id or None) if request.api_version >= 3 else None
        r = wait_answer(
            self._groups().heartbeat(req.group_id, req.generation_id, req.member_id, instance)
        )
        cls = response_class(request)
        return encode_response(request, cls(throttle_time_ms=0, error_code=_code(r)))

    def leave_group(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        v = request.api_version
        if v >= 3:
            members = [(m.member_id or "", m.group_instance_id or None) for m in req.members]
        else:
            members = [(req.member_id, None)]
        future = self._groups().leave_group(req.group_id, members)
        r = expected(wait_answer(future), LeaveResult, LeaveResult)
        cls = response_class(request)
        top = r.error
        if v < 3 and top == NONE and r.members:
            top = r.members[0][2]  # before v3 the one member's error is the answer's
        body = cls(
            throttle_time_ms=0,
            error_code=error_code(top),
            members=[
                cls.MemberResponse(member_id=m, group_instance_id=i, error_code=error_code(e))
                for m, i, e in r.members
            ],
        )
        return encode_response(request, body)

    # --- KIP-848 --------------------------------------------------------------------

    def consumer_group_heartbeat(self, request: KafkaRequest) -> list[Part]:
        """Topic ids on the wire, topic names in the coordinator: owned partitions of a
        topic id this node does not know are left out (the topic is gone)."""
        req = request.body
        v = request.api_version
        ids = _topic_ids(self.node.metadata_image())
        names = {topic_uuid: name for name, topic_uuid in ids.items()}
        owned = None
        if req.topic_partitions is not None:
            owned = tuple(
                (names[t.topic_id], p)
                for t in req.topic_partitions
                if t.topic_id in names
                for p in t.partitions
            )
        beat = ConsumerHeartbeat(
            req.group_id,
            req.member_id,
            req.member_epoch,
            req.instance_id,
            req.rack_id,
            req.rebalance_timeout_ms,
            None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
            # librdkafka sends "" for no regex: empty counts as absent, as in Kafka.
            (req.subscribed_topic_regex or None) if v >= 1 else None,
            req.server_assignor,
            owned,
            member_id_from_client=v >= 1,
            client_id=request.client_id or "",
            client_host="/" + request.client_host,
        )
        own = self.node.metadata_image().group_configs.get(req.group_id)
        if own:  # the group's configs (Kafka 4.0's GROUP resource)
            session, interval = group_configs.overrides(self.node.groups.config.consumer, own)
            beat = replace(beat, session_timeout_ms=session, heartbeat_interval_ms=interval)
        future = self._groups().consumer_group_heartbeat(beat)
        r = expected(wait_answer(future), ConsumerHeartbeatResult, ConsumerHeartbeatResult)
        cls = response_class(request)
        assignment = None
        if r.assignment is not None:
            assignment = cls.Assignment(
                topic_partitions=[
                    cls.Assignment.TopicPartitions(topic_id=ids[t], partitions=list(ps))
                    for t, ps in r.assignment
                    if t in ids
                ]
            )
        body = cls(
            throttle_time_ms=0,
            error_code=error_code(r.error),
            error_message=r.error_message,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=assignment,
        )
        return encode_response(request, body)

    def consumer_group_describe(self, request: KafkaRequest) -> list[Part]:
        cls = response_class(request)
        G = cls.DescribedGroup
        A = G.Member.Assignment
        ids = _topic_ids(self.node.metadata_image())

        def assignment(parts: tuple[tuple[str, tuple[int, ...]], ...]) -> Any:
            return A(
                topic_partitions=[
                    A.TopicPartitions(topic_id=ids[t], topic_name=t, partitions=list(ps))
                    for t, ps in parts
                    if t in ids
                ]
            )

        out = []
        for group_id in request.body.group_ids:
            r = wait_answer(self._groups().consumer_group_describe(group_id))
            if not isinstance(r, DescribedConsumerGroup):
                r = DescribedConsumerGroup(error_of(r), group_id)
            out.append(
                G(
                    error_code=error_code(r.error),
                    error_message=r.error_message,
                    group_id=group_id,
                    group_state=r.state,
                    group_epoch=r.group_epoch,
                    assignment_epoch=r.assignment_epoch,
                    assignor_name=r.assignor_name,
                    members=[
                        G.Member(
                            member_id=m.member_id,
                            instance_id=m.instance_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            subscribed_topic_regex=None,
                            assignment=assignment(m.assignment),
                            target_assignment=assignment(m.target_assignment),
                            member_type=CONSUMER_MEMBER,  # v1 (KIP-1099): not a classic one
                        )
                        for m in r.members
                    ],
                )
            )
        return encode_response(request, cls(throttle_time_ms=0, groups=out))

    # --- offsets --------------------------------------------------------------------

    def offset_commit(self, request: KafkaRequest) -> Deferred:
        req = request.body
        v = request.api_version
        partitions = commit_partitions(req.topics, leader_epochs=v >= 6)
        instance = (req.group_instance_id or None) if v >= 7 else None
        retention = req.retention_time_ms if 2 <= v <= 4 else -1
        unknown = self._unknown_partitions(req.group_id, partitions)
        known = [p for p in partitions if (p.topic, p.partition) not in unknown]
        future = (
            self._groups().offset_commit(
                req.group_id,
                req.generation_id_or_member_epoch,
                req.member_id,
                instance,
                known,
                retention if retention is not None and retention >= 0 else -1,
            )
            if known
            else done_future(CommitResult(()))
        )

        def answer() -> list[Part]:
            cls = response_class(request)
            errors = commit_errors(wait_answer(future), known)
            errors.update(dict.fromkeys(unknown, UNKNOWN_TOPIC_OR_PARTITION))
            topics = partition_errors(
                req.topics,
                cls.OffsetCommitResponseTopic,
                cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition,
                lambda t, p: error_code(errors.get((t, p), NONE)),
            )
            return encode_response(request, cls(throttle_time_ms=0, topics=topics))

        return Deferred(answer)

    def _unknown_partitions(
        self, group_id: str, partitions: list[CommitPartition]
    ) -> set[tuple[str, int]]:
        """The committed partitions the metadata does not hold (a topic that does not
        exist, a partition beyond its count): Kafka answers them UNKNOWN_TOPIC_OR_PARTITION
        and stores nothing for them. Authorization comes first, as in Kafka: a caller
        refused the group or the topic gets that refusal, never word of existence."""
        authorizer = self._authorizer()
        image = self.node.metadata_image()
        unknown = {
            (p.topic, p.partition)
            for p in partitions
            if image.partition(p.topic, p.partition) is None
            and allowed(authorizer, AclOperation.READ, ResourceType.TOPIC, p.topic)
        }
        if unknown and not allowed(authorizer, AclOperation.READ, ResourceType.GROUP, group_id):
            return set()
        return unknown

    def _fetch_group(
        self, group_id: str, topics: list[Any] | None, require_stable: bool = False
    ) -> tuple[str, list[tuple[str, list[FetchedOffset]]]]:
        """(group error, [(topic, its fetched offsets)]). With `require_stable` (v7+) a
        partition whose offset is pending in a transaction is UNSTABLE_OFFSET_COMMIT."""
        wanted = (
            None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
        )
        future = self._groups().offset_fetch(group_id, wanted)
        r = expected(wait_answer(future), OffsetFetchResult, OffsetFetchResult)
        if require_stable:
            r = stable_only(r, self.node.groups.pending_txn_offsets(group_id))
        return r.error, offsets_by_topic(r)

    def offset_fetch(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        v = request.api_version
        cls = response_class(request)
        if v >= 8:
            G = cls.OffsetFetchResponseGroup
            T = G.OffsetFetchResponseTopics
            groups = []
            for g in req.groups:
                error, topics = self._fetch_group(g.group_id, g.topics, req.require_stable)
                groups.append(
                    G(
                        group_id=g.group_id,
                        error_code=error_code(error),
                        topics=_fetched_topics(T, T.OffsetFetchResponsePartitions, topics),
                    )
                )
            return encode_response(request, cls(throttle_time_ms=0, groups=groups))
        stable = bool(getattr(req, "require_stable", False))
        error, topics = self._fetch_group(req.group_id, req.topics, stable)
        if v < 2 and error != NONE:
            # Before v2 there is no top-level error: each partition carries it.
            wanted = [(t.name, p) for t in req.topics or [] for p in t.partition_indexes]
            topics = [(t, [FetchedOffset(t, p, -1, -1, "", error)]) for t, p in wanted]
        T = cls.OffsetFetchResponseTopic
        body = cls(
            throttle_time_ms=0,
            error_code=error_code(error),
            topics=_fetched_topics(T, T.OffsetFetchResponsePartition, topics),
        )
        return encode_response(request, body)

    def offset_delete(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        future = self._groups().offset_delete(req.group_id, wanted)
        r = expected(wait_answer(future), OffsetDeleteResult, OffsetDeleteResult)
        T = cls.OffsetDeleteResponseTopic
        P = T.OffsetDeleteResponsePartition
        topics = [
            T(name=t, partitions=[P(partition_index=p, error_code=error_code(e)) for p, e in parts])
            for t, parts in errors_by_topic(r.errors)
        ]
        body = cls(error_code=error_code(r.error), throttle_time_ms=0, topics=topics)
        return encode_response(request, body)

    # --- administration -------------------------------------------------------------

    def list_groups(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        v = request.api_version
        cls = response_class(request)
        states = set(req.states_filter or []) if v >= 4 else set()
        types = {t.lower() for t in (req.types_filter or [])} if v >= 5 else set()
        error, groups = self._groups().list_groups(states)
        if types:
            groups = [g for g in groups if g.group_type in types]
        body = cls(
            throttle_time_ms=0,
            error_code=error_code(error),
            groups=[
                cls.ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in groups
            ],
        )
        return encode_response(request, body)

    def describe_groups(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        G = cls.DescribedGroup
        out = []
        for group_id in req.groups:
            r = wait_answer(self._groups().describe_group(group_id))
            if not isinstance(r, DescribedGroup):
                r = DescribedGroup(error_of(r), group_id, "", "", "")
            message = None
            if request.api_version >= 6 and r.error == NONE and r.state == "Dead":
                # KIP-1043: v6 says the group is not there rather than "Dead".
                r = replace(r, error="GROUP_ID_NOT_FOUND")
                message = f"Group {group_id} not found."
            out.append(
                G(
                    error_code=error_code(r.error),
                    error_message=message,
                    group_id=group_id,
                    group_state=r.state,
                    protocol_type=r.protocol_type,
                    protocol_data=r.protocol,
                    members=[
                        G.DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in r.members
                    ],
                    authorized_operations=self._group_operations(request, r),
                )
            )
        return encode_response(request, cls(throttle_time_ms=0, groups=out))

    def _group_operations(self, request: KafkaRequest, r: DescribedGroup) -> set[int] | None:
        """KIP-430's bit field when asked for (v3+), else Kafka's INT32 MIN (None)."""
        if not getattr(request.body, "include_authorized_operations", False) or r.error != NONE:
            return None
        return authorized_operations(self._authorizer(), ResourceType.GROUP, r.group_id)

    def delete_groups(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        results = []
        for group_id in req.groups_names:
            r = wait_answer(self._groups().delete_group(group_id))
            results.append(cls.DeletableGroupResult(group_id=group_id, error_code=_code(r)))
        return encode_response(request, cls(throttle_time_ms=0, results=results))


def _fetched_topics(
    topic: Any, partition: Any, topics: list[tuple[str, list[FetchedOffset]]]
) -> list[Any]:
    """OffsetFetch's topics in the response's classes (they differ by version)."""
    return [
        topic(
            name=name,
            partitions=[
                partition(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=error_code(f.error),
                )
                for f in offsets
            ],
        )
        for name, offsets in topics
    ]
