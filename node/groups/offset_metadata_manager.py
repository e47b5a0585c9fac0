"""The committed offsets of one shard's groups (Kafka's OffsetMetadataManager),
without I/O: OffsetCommit (checked against the committing member of either group
type, applied once replicated), OffsetFetch, OffsetDelete and the expiry of
offsets.retention.minutes. The groups are the group metadata manager's."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.storage.txn_verification import VerificationGuard

from . import offsets_records as rec
from .classic_group_protocol import check_member
from .coordinator_actions import Action, Record
from .coordinator_records import group_tombstone, offset_commit_record, offset_tombstone
from .group_errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    append_error,
)
from .group_messages import (
    CommitResult,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetDeleteResult,
    OffsetFetchResult,
    TopicPartition,
)
from .group_metadata_manager import GroupMetadataManager
from .group_state import ClassicGroup, GroupState


class OffsetMetadataManager:
    """The offsets of `manager`'s groups: group id → partition → the last committed
    value (acknowledged appends only)."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.config, self.actions = manager.config, manager.actions
        self.offsets: dict[str, dict[TopicPartition, rec.OffsetCommitValue]] = {}
        # TxnOffsetCommit: producer id -> group -> offsets, visible once its transaction
        # commits (the COMMIT marker on this partition), dropped if it aborts.
        self.pending: dict[int, dict[str, dict[TopicPartition, rec.OffsetCommitValue]]] = {}
        self._expiring: set[tuple[str, TopicPartition | None]] = set()
        self._next_expiry_check = 0

    def load(self, offsets: Mapping[str, Mapping[TopicPartition, rec.OffsetCommitValue]]) -> None:
        self.offsets = {g: dict(o) for g, o in offsets.items() if o}

    def tombstones(self, group_id: str) -> list[Record]:
        """The records that delete the group's offsets."""
        return [offset_tombstone(group_id, tp) for tp in sorted(self.offsets.get(group_id, {}))]

    def tick(self, now_ms: int) -> None:
        if now_ms >= self._next_expiry_check:
            self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms
            self._expire(now_ms)

    # --- OffsetCommit, OffsetFetch, OffsetDelete ------------------------------------

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of `producer_id` landed on this partition."""
        for group_id, values in self.pending.pop(producer_id, {}).items():
            if commit:
                self.offsets.setdefault(group_id, {}).update(values)

    def commit(
        self,
        request_id: int,
        req: OffsetCommitRequest,
        now_ms: int,
        producer: tuple[int, int] | None = None,
        guard: VerificationGuard | None = None,
    ) -> list[Action]:
        """OffsetCommit, or with `producer` TxnOffsetCommit: the offsets are written in
        the producer's transaction (verified with `guard`, KIP-890) and held pending
        until it ends."""
        group_id, partitions, retention_ms = req.group_id, req.partitions, req.retention_ms

        def fail(error: str) -> list[Action]:
            self.actions.respond(
                request_id,
                CommitResult(tuple((p.topic, p.partition, error) for p in partitions)),
            )
            return self.actions.take()

        group = self._committing_group(req, now_ms)
        if isinstance(group, str):
            return fail(group)
        errors: dict[TopicPartition, str] = {}
        records: list[Record] = []
        values: dict[TopicPartition, rec.OffsetCommitValue] = {}
        for p in partitions:
            tp = (p.topic, p.partition)
            if len(p.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                errors[tp] = OFFSET_METADATA_TOO_LARGE
                continue
            expire = now_ms + retention_ms if retention_ms >= 0 else -1
            value = rec.OffsetCommitValue(p.offset, p.leader_epoch, p.metadata, now_ms, expire)
            values[tp] = value
            records.append(offset_commit_record(group_id, tp, value))

        def answer(append: str) -> None:
            out = []
            for p in partitions:
                tp = (p.topic, p.partition)
                out.append((p.topic, p.partition, errors.get(tp, append)))
            self.actions.respond(request_id, CommitResult(tuple(out)))

        if not records:
            answer(NONE)
            return self.actions.take()

        def stored(error: str, _now: int) -> None:
            if error == NONE:
                # In log order: the last append for a partition is its committed offset.
                if producer is None:
                    self.offsets.setdefault(group_id, {}).update(values)
                else:
                    held = self.pending.setdefault(producer[0], {})
                    held.setdefault(group_id, {}).update(values)
                manager = self.manager
                if group_id not in manager.groups and group_id not in manager.consumer_groups:
                    manager.groups[group_id] = group
                answer(NONE)
            else:
                answer(append_error(error))

        if not self.actions.append(records, stored, producer, guard):
            return fail(COORDINATOR_NOT_AVAILABLE)
        return self.actions.take()

    def _committing_group(self, req: OffsetCommitRequest, now_ms: int) -> ClassicGroup | str:
        """The classic group that is to hold the committed offsets (a new one if no
        group holds any yet), or the error the commit is refused with: a member must
        be one of its group's, at its generation (a KIP-848 member, at its epoch)."""
        group_id, generation, member_id = req.group_id, req.generation, req.member_id
        consumer_group = self.manager.consumer_groups.get(group_id)
        group = self.manager.groups.get(group_id)
        if consumer_group is not None:
            # KIP-848: the generation is the member's epoch, which must be current.
            if generation >= 0 or member_id:
                epoch = consumer_group.current_epoch_of(member_id)
                if epoch is None:
                    return UNKNOWN_MEMBER_ID
                if generation != epoch:
                    return STALE_MEMBER_EPOCH
            elif consumer_group.members:
                return UNKNOWN_MEMBER_ID  # an anonymous commit into a live group
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)  # offsets' holder only
        elif group is None:
            if generation >= 0 or member_id:
                return ILLEGAL_GENERATION
            # A commit from outside any group (assign() users, admin tools).
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            self.manager.groups[group_id] = group
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if consumer_group is None and not (
            generation < 0 and not member_id and group.state is GroupState.EMPTY
        ):
            error = check_member(group, member_id, req.group_instance_id)
            if error is not None:
                return error
            if generation != group.generation:
                return ILLEGAL_GENERATION
            if group.state is GroupState.COMPLETING_REBALANCE:
                return REBALANCE_IN_PROGRESS
            m = group.members[member_id]
            m.heartbeat_deadline_ms = max(m.heartbeat_deadline_ms, now_ms + m.session_timeout_ms)
        return group

    def fetch_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition] | None
    ) -> list[Action]:
        """Committed offsets (only acknowledged ones); `partitions` None: all."""
        committed = self.offsets.get(group_id, {})
        wanted = sorted(committed) if partitions is None else partitions
        out = []
        for tp in wanted:
            v = committed.get(tp)
            if v is None:
                out.append(FetchedOffset(tp[0], tp[1], -1, -1, ""))
            else:
                out.append(FetchedOffset(tp[0], tp[1], v.offset, v.leader_epoch, v.metadata))
        self.actions.respond(request_id, OffsetFetchResult(NONE, tuple(out)))
        return self.actions.take()

    def delete_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition]
    ) -> list[Action]:
        group = self.manager.groups.get(group_id)
        if group is None:
            self.actions.respond(request_id, OffsetDeleteResult(GROUP_ID_NOT_FOUND))
            return self.actions.take()
        subscribed = group.subscribed_topics()
        errors: dict[TopicPartition, str] = {}
        records: list[Record] = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                errors[tp] = GROUP_SUBSCRIBED_TO_TOPIC
            elif tp in self.offsets.get(group_id, {}):
                records.append(offset_tombstone(group_id, tp))

        def stored(error: str, _now: int) -> None:
            if error == NONE:
                committed = self.offsets.get(group_id, {})
                for tp in partitions:
                    if tp not in errors:
                        committed.pop(tp, None)
                if not committed:
                    self.offsets.pop(group_id, None)
            result = OffsetDeleteResult(
                NONE if error == NONE else append_error(error),
                tuple((t, p, errors.get((t, p), NONE)) for t, p in partitions),
            )
            self.actions.respond(request_id, result)

        if not records:
            stored(NONE, -1)
        elif not self.actions.append(records, stored):
            self.actions.respond(request_id, OffsetDeleteResult(COORDINATOR_NOT_AVAILABLE))
        return self.actions.take()

    # --- expiry -------------------------------------------------------------------

    def _expire(self, now_ms: int) -> None:
        """offsets.retention.minutes: the offsets of a group without members expire
        that long after both their commit and the group's becoming empty (or at the
        expire timestamp their commit asked for, OffsetCommit v2-v4); a group
        with neither members nor offsets then goes too. Tombstones, like a delete."""
        retention = self.config.offsets_retention_ms
        for group_id, committed in list(self.offsets.items()):
            group = self.manager.groups.get(group_id)
            if group is None or group.state is not GroupState.EMPTY:
                continue
            expired = [
                tp
                for tp, v in committed.items()
                if (
                    now_ms >= v.expire_timestamp
                    if v.expire_timestamp >= 0
                    else now_ms >= max(v.commit_timestamp, group.state_timestamp_ms) + retention
                )
                and (group_id, tp) not in self._expiring
            ]
            if not expired:
                continue
            everything = len(expired) == len(committed)
            records = [offset_tombstone(group_id, tp) for tp in expired]
            if everything:
                records.append(group_tombstone(group_id))
            keys = [(group_id, tp) for tp in expired]
            self._expiring.update(keys)

            def stored(
                error: str,
                now: int,
                group_id: str = group_id,
                expired: list[TopicPartition] = expired,
                keys: list[tuple[str, TopicPartition]] = keys,
                everything: bool = everything,
            ) -> None:
                self._expiring.difference_update(keys)
                if error != NONE:
                    return
                committed = self.offsets.get(group_id, {})
                for tp in expired:
                    committed.pop(tp, None)
                if not committed:
                    self.offsets.pop(group_id, None)
                    if everything:
                        self.manager.remove_if_empty(group_id, now if now >= 0 else now_ms)

            self.actions.append(records, stored)
