"""Kafka's ACL rules for the group APIs, in front of the node's group coordinator, for
both the Kafka listener (node/kafka/groups.py) and the gRPC GroupCoordinator service:

- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat: READ on the
  group; ConsumerGroupHeartbeat also DESCRIBE on each subscribed topic (else the
  answer is TOPIC_AUTHORIZATION_FAILED, as Kafka 4 answers it);
- OffsetCommit: READ on the group, then READ on each topic (its partitions get
  TOPIC_AUTHORIZATION_FAILED; nothing is written for them);
- OffsetFetch: DESCRIBE on the group, then DESCRIBE on each topic (named partitions
  get TOPIC_AUTHORIZATION_FAILED; a fetch of all the group's offsets leaves the
  others out);
- DescribeGroups, ConsumerGroupDescribe: DESCRIBE on the group (a described consumer
  group whose assignments name a topic the caller may not describe is answered
  TOPIC_AUTHORIZATION_FAILED without its members, as Kafka does);
- ListGroups: DESCRIBE on the cluster lists every group, else the groups the caller
  may describe (never an error);
- DeleteGroups: DELETE on the group; OffsetDelete: DELETE on the group, then READ on
  each topic.

A refused group is GROUP_AUTHORIZATION_FAILED and the coordinator is not asked.
`may` is the authorizer bound to the caller (principal and address) when the request
arrived: answers that are filtered are filtered on the coordinator's thread."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from ..groups.group_messages import (
    CommitPartition,
    CommitResult,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
    ErrorResult,
    FetchedOffset,
    JoinRequest,
    ListedGroup,
    OffsetDeleteResult,
    OffsetFetchResult,
    Result,
    SyncRequest,
)
from .acls import CLUSTER_NAME, AclOperation, ResourceType

May = Callable[[AclOperation, ResourceType, str], bool]
GROUP_DENIED = "GROUP_AUTHORIZATION_FAILED"
TOPIC_DENIED = "TOPIC_AUTHORIZATION_FAILED"
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER


def done_future(result: Result) -> Future[Result]:
    """A future that already holds its result."""
    f: Future[Result] = Future()
    f.set_result(result)
    return f


def _then(future: Future[Result], fn: Callable[[Result], Result]) -> Future[Result]:
    """The future's result, passed through `fn` when it comes."""
    out: Future[Result] = Future()

    def done(f: Future[Result]) -> None:
        try:
            out.set_result(fn(f.result()))
        except Exception as e:  # noqa: BLE001 - the waiting handler gets it, as without ACLs
            out.set_exception(e)

    future.add_done_callback(done)
    return out


class GuardedGroups:
    """The group coordinator's request methods, each authorized first."""

    def __init__(self, groups: Any, may: May) -> None:
        self._groups = groups
        self._may = may

    def __getattr__(self, name: str) -> Any:  # config, is_loading: no request
        return getattr(self._groups, name)

    def _topics(self, op: AclOperation, names: list[str]) -> set[str]:
        """The distinct topics of `names` the caller may not `op`."""
        return {t for t in dict.fromkeys(names) if not self._may(op, TOPIC, t)}

    # --- membership -------------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> Future[Result]:
        if not self._may(READ, GROUP, req.group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.join_group(req)  # type: ignore[no-any-return]

    def sync_group(self, req: SyncRequest) -> Future[Result]:
        if not self._may(READ, GROUP, req.group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.sync_group(req)  # type: ignore[no-any-return]

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance: str | None
    ) -> Future[Result]:
        if not self._may(READ, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.heartbeat(  # type: ignore[no-any-return]
            group_id, generation, member_id, instance
        )

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> Future[Result]:
        if not self._may(READ, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.leave_group(group_id, members)  # type: ignore[no-any-return]

    def consumer_group_heartbeat(self, req: ConsumerHeartbeat) -> Future[Result]:
        if not self._may(READ, GROUP, req.group_id):
            return done_future(ConsumerHeartbeatResult(GROUP_DENIED))
        refused = self._topics(DESCRIBE, list(req.subscribed_topic_names or ()))
        if refused:
            return done_future(
                ConsumerHeartbeatResult(
                    TOPIC_DENIED, f"not authorized to describe {', '.join(sorted(refused))}"
                )
            )
        return self._groups.consumer_group_heartbeat(req)  # type: ignore[no-any-return]

    # --- offsets ----------------------------------------------------------------------

    def offset_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance: str | None,
        partitions: list[CommitPartition],
        retention_ms: int = -1,
    ) -> Future[Result]:
        if not self._may(READ, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        refused = self._topics(READ, [p.topic for p in partitions])
        denied = tuple(
            (p.topic, p.partition, TOPIC_DENIED) for p in partitions if p.topic in refused
        )
        kept = [p for p in partitions if p.topic not in refused]
        if not kept:
            return done_future(CommitResult(denied))
        future = self._groups.offset_commit(
            group_id, generation, member_id, instance, kept, retention_ms
        )
        if not denied:
            return future  # type: ignore[no-any-return]

        def merge(r: Result) -> Result:
            if isinstance(r, CommitResult):
                return CommitResult(r.errors + denied)
            return CommitResult(
                tuple((p.topic, p.partition, getattr(r, "error", "")) for p in kept) + denied
            )

        return _then(future, merge)

    def offset_fetch(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> Future[Result]:
        if not self._may(DESCRIBE, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        if partitions is None:  # all of the group's: the refused topics left out

            def keep_allowed(r: Result) -> Result:
                if not isinstance(r, OffsetFetchResult):
                    return r
                refused = self._topics(DESCRIBE, [f.topic for f in r.offsets])
                if not refused:
                    return r
                return replace(r, offsets=tuple(f for f in r.offsets if f.topic not in refused))

            return _then(self._groups.offset_fetch(group_id, None), keep_allowed)
        refused = self._topics(DESCRIBE, [t for t, _ in partitions])
        if not refused:
            return self._groups.offset_fetch(group_id, partitions)  # type: ignore[no-any-return]
        denied = tuple(
            FetchedOffset(t, p, -1, -1, "", TOPIC_DENIED) for t, p in partitions if t in refused
        )
        kept = [(t, p) for t, p in partitions if t not in refused]
        if not kept:
            return done_future(OffsetFetchResult("NONE", denied))

        def merge(r: Result) -> Result:
            if not isinstance(r, OffsetFetchResult):
                return r
            return replace(r, offsets=r.offsets + denied)

        return _then(self._groups.offset_fetch(group_id, kept), merge)

    def offset_delete(self, group_id: str, partitions: list[tuple[str, int]]) -> Future[Result]:
        if not self._may(DELETE, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        refused = self._topics(READ, [t for t, _ in partitions])
        denied = tuple((t, p, TOPIC_DENIED) for t, p in partitions if t in refused)
        kept = [(t, p) for t, p in partitions if t not in refused]
        if not kept:
            return done_future(OffsetDeleteResult("NONE", denied))
        future = self._groups.offset_delete(group_id, kept)
        if not denied:
            return future  # type: ignore[no-any-return]

        def merge(r: Result) -> Result:
            if not isinstance(r, OffsetDeleteResult) or r.error != "NONE":
                return r
            return replace(r, errors=r.errors + denied)

        return _then(future, merge)

    # --- administration ---------------------------------------------------------------

    def list_groups(self, states: set[str]) -> tuple[str, list[ListedGroup]]:
        error, groups = self._groups.list_groups(states)
        if self._may(DESCRIBE, CLUSTER, CLUSTER_NAME):
            return error, groups
        return error, [g for g in groups if self._may(DESCRIBE, GROUP, g.group_id)]

    def describe_group(self, group_id: str) -> Future[Result]:
        if not self._may(DESCRIBE, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.describe_group(group_id)  # type: ignore[no-any-return]

    def consumer_group_describe(self, group_id: str) -> Future[Result]:
        if not self._may(DESCRIBE, GROUP, group_id):
            return done_future(DescribedConsumerGroup(GROUP_DENIED, group_id))

        def hide_refused_topics(r: Result) -> Result:
            if not isinstance(r, DescribedConsumerGroup):
                return r
            topics = [
                t for m in r.members for a in (m.assignment, m.target_assignment) for t, _ in a
            ]
            if not self._topics(DESCRIBE, topics):
                return r
            return DescribedConsumerGroup(
                TOPIC_DENIED,
                group_id,
                "The group has described topic(s) that the client is not authorized to describe.",
            )

        return _then(self._groups.consumer_group_describe(group_id), hide_refused_topics)

    def delete_group(self, group_id: str) -> Future[Result]:
        if not self._may(DELETE, GROUP, group_id):
            return done_future(ErrorResult(GROUP_DENIED))
        return self._groups.delete_group(group_id)  # type: ignore[no-any-return]
