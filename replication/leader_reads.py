"""A partition leader's answers to reads other than a follower's fetch: epoch fencing
of a request, OffsetsForLeaderEpoch (6.3), ListOffsets (8.3) and a consumer's fetch below
the high watermark (8.1, 8.2). A part of `PartitionReplica`, kept in its own class so
each stays one idea."""

from __future__ import annotations

from seglog.storage.file_slice import FileSlice

from .mypyc_marks import trait
from .replica_messages import (
    EARLIEST_TIMESTAMP,
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    LATEST_TIMESTAMP,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    ConsumerFetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ReplicaLog,
    Role,
)


@trait  # a mixin of PartitionReplica (replication/mypyc_marks.py)
class LeaderReads:
    # The replica's state this part reads (PartitionReplica sets it).
    log: ReplicaLog
    role: Role
    leader_epoch: int
    epoch_start_offset: int

    def consumer_read_bound(self, read_committed: bool = False) -> int:
        """Consumers read below this offset only: the HW (8.1), or for READ_COMMITTED
        the last stable offset (docs/transactions.md)."""
        return self.log.last_stable_offset if read_committed else self.log.high_watermark

    def _fence(self, current_leader_epoch: int, *, require_leader: bool = True) -> str | None:
        """Leader-epoch fencing of a request (7.6)."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                return FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return UNKNOWN_LEADER_EPOCH
        if require_leader and self.role is not Role.LEADER:
            return NOT_LEADER_OR_FOLLOWER
        return None

    def handle_offsets_for_leader_epoch(
        self, req: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        """6.3: fence, require leadership, answer endOffsetFor (undefined is NONE, -1/-1)."""
        fenced = self._fence(req.current_leader_epoch)
        if fenced is not None:
            return OffsetsForLeaderEpochResponse(fenced, correlation_id=req.correlation_id)
        epoch, end = self.log.epoch_cache.end_offset_for(req.leader_epoch, self.log.log_end_offset)
        return OffsetsForLeaderEpochResponse(NONE, epoch, end, req.correlation_id)

    def handle_list_offsets(self, req: ListOffsetsRequest) -> ListOffsetsResponse:
        """8.3 for LATEST, EARLIEST and timestamps >= 0; replicas get the LEO for LATEST,
        READ_COMMITTED clients the LSO."""
        cid = req.correlation_id
        fenced = self._fence(req.current_leader_epoch)
        if fenced is not None:
            return ListOffsetsResponse(fenced, correlation_id=cid)
        from_client = req.replica_id < 0
        if (
            from_client
            and req.timestamp != EARLIEST_TIMESTAMP
            and self.log.high_watermark < self.epoch_start_offset
        ):
            # 7.4 last paragraph: a new leader's HW is still below its epoch start.
            return ListOffsetsResponse(OFFSET_NOT_AVAILABLE, correlation_id=cid)
        hw = self.consumer_read_bound(req.read_committed)  # the LSO for READ_COMMITTED
        if req.timestamp == LATEST_TIMESTAMP:
            offset = hw if from_client else self.log.log_end_offset
            return ListOffsetsResponse(NONE, offset, -1, self.leader_epoch, cid)
        if req.timestamp == EARLIEST_TIMESTAMP:
            start = self.log.log_start_offset
            earliest = self.log.epoch_cache.earliest_entry
            epoch = (
                earliest.epoch if earliest is not None and earliest.start_offset <= start else -1
            )
            return ListOffsetsResponse(NONE, start, -1, epoch, cid)
        if req.timestamp < 0:
            return ListOffsetsResponse(INVALID_REQUEST, correlation_id=cid)
        found = self.log.offset_for_timestamp(req.timestamp)
        bound = hw if from_client else self.log.log_end_offset
        if found is None or found.offset >= bound:
            return ListOffsetsResponse(NONE, -1, -1, -1, cid)
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        return ListOffsetsResponse(NONE, found.offset, found.timestamp, epoch, cid)

    def read_for_consumer(
        self,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int = -1,
        zero_copy: bool = False,
        read_committed: bool = False,
    ) -> ConsumerFetchResponse:
        """A consumer fetch: whole batches below the HW (8.1, 8.2), or for READ_COMMITTED
        below the last stable offset, with the aborted transactions they overlap (from
        the `.txnindex`). `zero_copy`: the records as a FileSlice of the segment."""
        fenced = self._fence(current_leader_epoch)
        if fenced is not None:
            return ConsumerFetchResponse(fenced)
        log = self.log
        hw = log.high_watermark
        start = log.log_start_offset
        if fetch_offset < start or fetch_offset > log.log_end_offset:
            return ConsumerFetchResponse(OFFSET_OUT_OF_RANGE, hw, start)
        lso = log.last_stable_offset
        bound = lso if read_committed else hw
        records: bytes | FileSlice
        if zero_copy:
            records = log.read_slice(fetch_offset, max_bytes, upper_bound=bound)
        else:
            data = log.read(fetch_offset, max_bytes, upper_bound=bound, min_one_batch=True)
            records = bytes(data.records)
        aborted = None
        if read_committed:
            # Bounded by the LSO, not the fetched range's end: a few more entries than
            # the records need, which a client ignores (Kafka's bound is per segment too).
            aborted = log.collect_aborted_transactions(fetch_offset, bound) if records else []
        return ConsumerFetchResponse(NONE, hw, start, records, lso, aborted)
