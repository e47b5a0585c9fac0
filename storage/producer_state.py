"""Producer state: idempotence / transaction bookkeeping per producer id, and its snapshots.

Mirrors Kafka's ProducerStateManager, ProducerStateEntry, ProducerAppendInfo and
BatchMetadata (docs/architecture.md (storage)). The Log drives it:

* leader / follower append: `prepare_append` (validate, before the bytes are written)
  then `update` (commit, after) and `update_map_end_offset(last_offset + 1)`;
* rebuild: `truncate_and_reload`, then `replay_batch` for every batch from the returned
  offset to the log end, then `update_map_end_offset(log_end)` and `take_snapshot()`;
* segment roll: `update_map_end_offset(new_base)` and `take_snapshot(sync=False)`;
* segment deletion: `rename_snapshot_for_deletion(base_offset)`.

One producer's entry, the append's bookkeeping (ProducerAppendInfo) and the checks a
batch must pass are storage/producer_state_entry.py; this module holds the map of every
producer of a partition, their expiry and the snapshot files.

No threads and no clocks: the caller serializes access and passes time in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from seglog.storage.errors import (
    CorruptSnapshotError,
    InvalidRecordError,
    KafkaStorageError,
    OutOfOrderSequenceError,
)
from seglog.storage.producer_snapshot import (
    DELETED_SUFFIX,
    TMP_SUFFIX,
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from seglog.storage.producer_state_entry import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchInfo,
    BatchMetadata,
    CompletedTxn,
    ControlMarker,
    DuplicateBatch,
    InvalidTxnStateError,
    ProducerAppendInfo,
    ProducerStateEntry,
    apply_data_batch,
    apply_marker,
    in_sequence,
)
from seglog.storage.txn_verification import VerificationGuard, VerificationStateEntry

# What the Log (and the simulator's log) take from here with the manager; they live in
# producer_state_entry.py.
__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "MAX_EXPIRED_PRODUCERS",
    "AppendOrigin",
    "ControlMarker",
    "DuplicateBatch",
    "ProducerStateManager",
]

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
# Expired producers remembered per partition (oldest forgotten first), so that a producer
# resuming after producer.id.expiration.ms continues where it left off instead of being
# refused with UNKNOWN_PRODUCER_ID (docs/replication-rules.md 5.6, 5.7).
MAX_EXPIRED_PRODUCERS = 1_000


_new_tuple = tuple.__new__


class ProducerStateManager:
    """Producer id -> state map for one partition, plus its `<offset>.snapshot` files."""

    def __init__(
        self,
        partition_dir: Path | str,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        *,
        transaction_verification_enabled: bool = False,
    ) -> None:
        self.partition_dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # transaction.partition.verification.enable (KIP-890): a client's transactional
        # batch that opens a transaction (or the group coordinator's, a TxnOffsetCommit)
        # must carry the guard of a verification the transaction coordinator answered
        # (storage/txn_verification.py).
        self.transaction_verification_enabled = transaction_verification_enabled
        self._verifications: dict[int, VerificationStateEntry] = {}
        self._producers: dict[int, ProducerStateEntry] = {}
        # Expired producers, oldest first, at most MAX_EXPIRED_PRODUCERS: a client batch
        # of one is judged against its last state; replicas and replays ignore them.
        self._expired: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0
        self._last_snapshot_offset = 0
        # Kafka's ongoingTxns (producer id -> first offset of its open transaction) and
        # unreplicatedTxns (closed by a marker the high watermark has not passed yet):
        # together they bound the last stable offset.
        self._ongoing: dict[int, int] = {}
        self._unreplicated: list[CompletedTxn] = []
        # Bumped on every change to the map so a stale ProducerAppendInfo is refused.
        self._version = 0
        self._remove_stale_tmp_files()

    # ------------------------------------------------------------------ state access

    @property
    def map_end_offset(self) -> int:
        """Exclusive end offset of the log prefix the in-memory state reflects."""
        return self._map_end_offset

    @property
    def last_snapshot_offset(self) -> int:
        return self._last_snapshot_offset

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only live view of pid -> entry."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def is_empty(self) -> bool:
        return not self._producers

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction, if any (the cleaner's bound)."""
        return min(self._ongoing.values()) if self._ongoing else None

    @property
    def ongoing_txns(self) -> Mapping[int, int]:
        """Read-only view of producer id -> first offset of its open transaction."""
        return MappingProxyType(self._ongoing)

    def first_unstable_offset(self) -> int | None:
        """Kafka's firstUnstableOffset: the first offset of the oldest transaction that
        is open or whose marker is not yet replicated (below the high watermark)."""
        first = self.first_undecided_offset()
        for txn in self._unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The lastStableOffset of a transaction's `.txnindex` entry: the first offset
        of another producer's open transaction, else the offset after its marker."""
        others = [first for pid, first in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """A marker closed `completed` (its entry is written): it stays unstable until the
        high watermark passes the marker."""
        self._unreplicated.append(completed)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def update_partition_dir(self, partition_dir: Path | str) -> None:
        """Follow a renamed partition directory (e.g. marked for deletion)."""
        self.partition_dir = Path(partition_dir)

    # ------------------------------------------------------------------ append path

    def new_append_info(self, origin: AppendOrigin) -> ProducerAppendInfo:
        return ProducerAppendInfo(origin, self._version)

    # ------------------------------------------------------------------ verification

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has a transaction open here at this epoch (Kafka's
        UnifiedLog.hasOngoingTransaction): its next batches need no verification."""
        entry = self._producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, producer_epoch: int, now_ms: int
    ) -> VerificationGuard | None:
        """The guard a verification of the producer's next transactional append carries
        (one per producer until an append or marker clears it), or None when its
        transaction is already open here (Kafka's maybeStartTransactionVerification)."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return None
        entry = self._verifications.get(producer_id)
        if entry is None:
            entry = VerificationStateEntry(now_ms, sequence, producer_epoch)
            self._verifications[producer_id] = entry
        entry.maybe_update_lowest_sequence_and_epoch(sequence, producer_epoch)
        return entry.guard

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verifications.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verifications.pop(producer_id, None)

    def _check_verified(
        self,
        current: ProducerStateEntry,
        batch: BatchInfo,
        guard: VerificationGuard | None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> None:
        """A client's transactional batch that opens a transaction here must carry the
        guard its verification was started with, still current (Kafka's
        batchMissingRequiredVerification); a marker or another transactional append in
        between cleared it, so the append cannot open a transaction the coordinator no
        longer has (a hanging transaction). The group coordinator's TxnOffsetCommit batch
        (origin COORDINATOR) too, its sequence unchecked (Kafka checks a client's only)."""
        if (
            current.current_txn_first_offset is not None
            and current.producer_epoch == batch.producer_epoch
        ):
            return
        pid = batch.producer_id
        entry = self._verifications.get(pid)
        if entry is None or not entry.guard.verify(guard):
            raise InvalidTxnStateError(
                f"record from producer {pid} (epoch {batch.producer_epoch}) at offset "
                f"{batch.base_offset} was not part of an ongoing transaction: this partition "
                f"was not verified in the producer's transaction"
            )
        if origin is AppendOrigin.CLIENT and batch.base_sequence > entry.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} at offset "
                f"{batch.base_offset}: {batch.base_sequence} (incoming seq. number), "
                f"{entry.lowest_sequence} (earliest seen sequence)"
            )

    def prepare_append(
        self,
        batch: BatchInfo,
        origin: AppendOrigin,
        marker: ControlMarker | None = None,
        append_info: ProducerAppendInfo | None = None,
        verification_guard: VerificationGuard | None = None,
    ) -> ProducerAppendInfo | DuplicateBatch:
        """Validate one batch and record its effect, without touching the committed state.

        Pass the ProducerAppendInfo returned for the previous batch of the same append as
        `append_info` to validate against the state that batch left; it is extended in
        place and returned. A validation error leaves `append_info` as it was. A CLIENT
        retry of a batch still in the producer's window returns DuplicateBatch (Kafka then
        appends nothing for the whole request). Batches without a producer id change
        nothing. `marker` must accompany a control batch; a control batch without one is
        treated as empty (compacted away) and ignored, as Kafka does. With
        transaction verification on, a CLIENT or COORDINATOR transactional batch that
        opens a transaction needs `verification_guard` (see `_check_verified`).
        """
        info = append_info if append_info is not None else self.new_append_info(origin)
        self._check_usable(info)
        if info.origin is not origin:
            raise ValueError(f"append info is for origin {info.origin.name}, not {origin.name}")
        if marker is not None and not batch.is_control:
            raise ValueError(f"marker given for a data batch at offset {batch.base_offset}")
        if not batch.has_producer_id:
            return info
        pid = batch.producer_id

        if origin is AppendOrigin.CLIENT:
            if batch.is_control:
                raise InvalidRecordError(
                    f"clients may not write control batches (producer {pid}, "
                    f"offset {batch.base_offset})"
                )
            if batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"batch from producer {pid} at offset {batch.base_offset} has a producer "
                    f"id but no sequence number"
                )
            # Kafka matches retries against the committed state only.
            committed = self._producers.get(pid) or self._expired.get(pid)
            if committed is not None:
                dup = committed.find_duplicate_batch(batch)
                if dup is not None:
                    if batch.is_transactional and not _in_open_txn(committed, dup):
                        raise OutOfOrderSequenceError(
                            f"transactional batch from producer {pid} (epoch "
                            f"{batch.producer_epoch}) repeats sequences "
                            f"{batch.base_sequence}..{batch.last_sequence} of its batch at "
                            f"offset {dup.first_offset}, which a transaction ended since"
                        )
                    return DuplicateBatch(dup.first_offset, dup.last_offset, dup.timestamp)

        if batch.last_offset < self._map_end_offset:
            raise ValueError(
                f"batch at offsets [{batch.base_offset}, {batch.last_offset}] lies below the "
                f"producer state end offset {self._map_end_offset} (offsets not assigned?)"
            )

        current = info._entries.get(pid)
        if current is None:
            current = self._producers.get(pid)
        if current is None and origin is AppendOrigin.CLIENT:
            current = self._expired.get(pid)
        if current is None:
            current = ProducerStateEntry(pid)
        candidate = current.copy()

        if batch.is_control:
            if marker is None:
                return info
            completed = apply_marker(candidate, batch, marker, origin)
            info._entries[pid] = candidate
            if completed is not None:
                info._completed_txns.append(completed)
        else:
            if (
                origin is not AppendOrigin.REPLICATION
                and batch.is_transactional
                and self.transaction_verification_enabled
            ):
                self._check_verified(current, batch, verification_guard, origin)
            started = apply_data_batch(candidate, batch, origin)
            info._entries[pid] = candidate
            if started:
                info._started_txns.append((pid, batch.base_offset))
        if batch.is_transactional:
            if info._transactional_pids is None:
                info._transactional_pids = set()
            info._transactional_pids.add(pid)
        return info

    def prepare_appends(
        self,
        batches: Iterable[BatchInfo],
        origin: AppendOrigin,
        verification_guard: VerificationGuard | None = None,
    ) -> ProducerAppendInfo | DuplicateBatch:
        """prepare_append over the data batches of one append, in order.

        Returns the first DuplicateBatch found (the append is then a retry and writes
        nothing). Control batches need their markers: use prepare_append for them.
        """
        if origin is AppendOrigin.CLIENT and isinstance(batches, list) and len(batches) == 1:
            return self._prepare_client_batch(batches[0], verification_guard)
        info = self.new_append_info(origin)
        for batch in batches:
            if batch.is_control and batch.has_producer_id and origin is not AppendOrigin.CLIENT:
                raise ValueError(
                    f"control batch at offset {batch.base_offset} needs its marker: "
                    f"use prepare_append(..., marker=..., append_info=...)"
                )
            result = self.prepare_append(
                batch, origin, append_info=info, verification_guard=verification_guard
            )
            if isinstance(result, DuplicateBatch):
                return result
        return info

    def _prepare_client_batch(
        self, batch: BatchInfo, verification_guard: VerificationGuard | None = None
    ) -> ProducerAppendInfo | DuplicateBatch:
        """prepare_append(batch, CLIENT) into a fresh ProducerAppendInfo, for the produce
        hot path: a known producer continuing its sequence in its current epoch, outside
        a transaction, checked against the committed entry directly. Anything else
        (and every error) takes the general path, which starts from the same state, so
        the result is the same either way."""
        info = ProducerAppendInfo(AppendOrigin.CLIENT, self._version)
        if not batch.has_producer_id:
            return info
        pid = batch.producer_id
        committed = self._producers.get(pid)
        first_seq = batch.base_sequence
        if (
            committed is None
            or not committed.batch_metadata
            or batch.producer_epoch != committed.producer_epoch
            or committed.producer_epoch == NO_PRODUCER_EPOCH
            or committed.current_txn_first_offset is not None
            or first_seq < 0
            or batch.is_control
            or batch.is_transactional
        ):
            return self.prepare_append(
                batch, AppendOrigin.CLIENT, append_info=info, verification_guard=verification_guard
            )
        last_seq = batch.last_sequence
        # Kafka matches retries against the committed state only.
        dup = committed.batch_with_sequence_range(first_seq, last_seq)
        if dup is not None:
            return DuplicateBatch(dup.first_offset, dup.last_offset, dup.timestamp)
        last_offset = batch.last_offset
        if last_offset < self._map_end_offset or not in_sequence(
            committed.batch_metadata[-1].last_seq, first_seq
        ):
            return self.prepare_append(
                batch, AppendOrigin.CLIENT, append_info=info, verification_guard=verification_guard
            )
        entry = committed.copy()
        timestamp = batch.max_timestamp
        # tuple.__new__ is what BatchMetadata(...) runs, minus a Python-level call.
        entry.batch_metadata.append(
            _new_tuple(
                BatchMetadata, (last_seq, last_offset, last_offset - batch.base_offset, timestamp)
            )
        )
        entry.last_timestamp = timestamp
        info._entries[pid] = entry
        return info

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit a prepared append (after its bytes are in the log)."""
        self._check_usable(append_info)
        for pid, entry in append_info._entries.items():
            if pid == NO_PRODUCER_ID:
                raise ValueError(f"invalid producer id {pid}")
            assert len(entry.batch_metadata) <= NUM_BATCHES_TO_RETAIN
            assert entry.batch_metadata.maxlen == NUM_BATCHES_TO_RETAIN
            self._producers[pid] = entry
            self._expired.pop(pid, None)
        if append_info._started_txns or append_info._completed_txns:
            for txn in append_info._completed_txns:
                self._ongoing.pop(txn.producer_id, None)
            for pid, first_offset in append_info._started_txns:
                if append_info._entries[pid].current_txn_first_offset == first_offset:
                    self._ongoing[pid] = first_offset
        # A transactional batch or marker appended: the transaction is open here now, or
        # over, so a verification started before it is spent (Kafka clears it likewise).
        if append_info._transactional_pids and self._verifications:
            for pid in append_info._transactional_pids:
                self._verifications.pop(pid, None)
        append_info._committed = True
        if append_info._entries:
            self._version += 1

    def update_map_end_offset(self, offset: int) -> None:
        """Record that the state now reflects every batch below `offset`."""
        if offset < self._map_end_offset:
            raise ValueError(
                f"map end offset may only grow outside truncation: "
                f"{offset} < {self._map_end_offset}"
            )
        self._map_end_offset = offset

    def replay_batch(
        self, batch: BatchInfo, marker: ControlMarker | None = None
    ) -> list[CompletedTxn]:
        """Apply a batch read back from the log, unvalidated (REPLICATION origin);
        returns the transaction its marker closed, if any (for the `.txnindex`)."""
        result = self.prepare_append(batch, AppendOrigin.REPLICATION, marker)
        assert isinstance(result, ProducerAppendInfo)  # no duplicate check outside CLIENT
        self.update(result)
        return result._completed_txns

    def _check_usable(self, info: ProducerAppendInfo) -> None:
        if info._committed:
            raise ValueError("this ProducerAppendInfo was already committed")
        if info._base_version != self._version:
            raise ValueError(
                "stale ProducerAppendInfo: producer state changed since it was prepared"
            )

    # ------------------------------------------------------------------ expiration

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for >= producer_id_expiration_ms with no open transaction
        from the active ones; the newest MAX_EXPIRED_PRODUCERS are remembered."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            self._remember_expired(self._producers.pop(pid))
        if expired:
            self._version += 1
        # Verifications never followed by an append linger no longer than a producer.
        stale = [
            pid
            for pid, v in self._verifications.items()
            if now_ms - v.timestamp_ms >= self.producer_id_expiration_ms
        ]
        for pid in stale:
            del self._verifications[pid]
        return expired

    def _remember_expired(self, entry: ProducerStateEntry) -> None:
        self._expired.pop(entry.producer_id, None)
        self._expired[entry.producer_id] = entry
        while len(self._expired) > MAX_EXPIRED_PRODUCERS:
            del self._expired[next(iter(self._expired))]

    @property
    def expired_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the expired producers still remembered, oldest first."""
        return MappingProxyType(self._expired)

    def clear(self) -> None:
        """Forget every producer (offsets and snapshot files are untouched)."""
        self._producers.clear()
        self._expired.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._version += 1

    # ------------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        return [offset for offset, _ in list_snapshots(self.partition_dir)]

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[0] if offsets else None

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write `<map_end_offset>.snapshot` unless no offset was added since the last one."""
        if self._map_end_offset <= self._last_snapshot_offset:
            return None
        path = snapshot_path(self.partition_dir, self._map_end_offset)
        # Remembered expired producers go in too: their old timestamps make any reader,
        # Kafka's included, take them as expired again on load.
        everyone = {**self._expired, **self._producers}
        entries = [everyone[pid].to_snapshot_entry() for pid in sorted(everyone)]
        write_snapshot(path, entries, sync=sync)
        self._last_snapshot_offset = self._map_end_offset
        return path

    def load_latest_snapshot_at_or_below(
        self, offset: int, now_ms: int, log_start_offset: int = 0
    ) -> int | None:
        """Replace the state with the newest readable snapshot at offset <= `offset`.

        Corrupt snapshots are deleted and the next older one is tried. Expired producers
        are not active but remembered (see MAX_EXPIRED_PRODUCERS). Returns the
        snapshot's offset, which becomes map_end_offset; with no usable snapshot the
        state is empty at `log_start_offset` and None is returned.
        """
        self._producers.clear()
        self._expired.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._version += 1
        for snap_offset, path in reversed(list_snapshots(self.partition_dir)):
            if snap_offset > offset:
                continue
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as exc:
                log.warning("deleting corrupt producer snapshot: %s", exc)
                self._delete_file(path)
                continue
            except FileNotFoundError:
                continue  # removed under us: the next older one will do
            expired = []
            for se in entries:
                entry = ProducerStateEntry.from_snapshot_entry(se)
                if self._is_expired(entry, now_ms):
                    expired.append(entry)
                else:
                    self._producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset is not None:
                        self._ongoing[entry.producer_id] = entry.current_txn_first_offset
            for entry in sorted(expired, key=lambda e: e.last_timestamp):
                self._remember_expired(entry)
            self._map_end_offset = snap_offset
            self._last_snapshot_offset = snap_offset
            return snap_offset
        self._map_end_offset = log_start_offset
        self._last_snapshot_offset = log_start_offset
        return None

    def delete_snapshots_outside(self, log_start_offset: int, end_offset: int) -> list[int]:
        """Delete snapshots not in (log_start_offset, end_offset]; returns their offsets."""
        deleted = []
        for snap_offset, path in list_snapshots(self.partition_dir):
            if snap_offset > end_offset or snap_offset <= log_start_offset:
                self._delete_file(path)
                deleted.append(snap_offset)
        return deleted

    def delete_snapshots_after(self, offset: int) -> list[int]:
        """Delete snapshots with offset > `offset`."""
        deleted = []
        for snap_offset, path in list_snapshots(self.partition_dir):
            if snap_offset > offset:
                self._delete_file(path)
                deleted.append(snap_offset)
        return deleted

    def delete_snapshots_before(self, offset: int) -> list[int]:
        """Delete snapshots with offset < `offset`."""
        deleted = []
        for snap_offset, path in list_snapshots(self.partition_dir):
            if snap_offset < offset:
                self._delete_file(path)
                deleted.append(snap_offset)
        return deleted

    def rename_snapshot_for_deletion(self, offset: int) -> Path | None:
        """`X.snapshot` -> `X.snapshot.deleted` (for async removal); None if there is none."""
        path = snapshot_path(self.partition_dir, offset)
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            path.rename(target)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KafkaStorageError(f"failed to rename producer snapshot {path}: {exc}") from exc
        return target

    def delete_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> list[int]:
        """Delete snapshots matching no segment base offset, except the newest such one
        when it is at or above the last segment's base (the clean-shutdown snapshot)."""
        bases = set(segment_base_offsets)
        strays = [(o, p) for o, p in list_snapshots(self.partition_dir) if o not in bases]
        if not strays:
            return []
        doomed = strays[:-1]
        newest_offset, newest_path = strays[-1]
        if bases and newest_offset < max(bases):
            doomed.append((newest_offset, newest_path))
        for _, path in doomed:
            self._delete_file(path)
        return [o for o, _ in doomed]

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Bring the state to `log_end_offset` from snapshots (docs/architecture.md (storage)).

        Returns the offset from which the Log must replay batches (through replay_batch)
        up to log_end_offset before update_map_end_offset(log_end_offset) + take_snapshot().
        The return value equals log_end_offset when nothing needs replaying.
        """
        if log_start_offset > log_end_offset:
            raise ValueError(f"log start {log_start_offset} > log end {log_end_offset}")
        self.delete_snapshots_outside(log_start_offset, log_end_offset)
        if self._map_end_offset != log_end_offset:
            self.load_latest_snapshot_at_or_below(log_end_offset, now_ms, log_start_offset)
        else:
            self.on_log_start_offset_incremented(log_start_offset)
        assert log_start_offset <= self._map_end_offset <= log_end_offset
        return self._map_end_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """The log start moved forward (retention, DeleteRecords)."""
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snapshot_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the state restarts empty at `offset`."""
        self._producers.clear()
        self._expired.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._version += 1
        for _, path in list_snapshots(self.partition_dir):
            self._delete_file(path)
        self._last_snapshot_offset = 0
        self._map_end_offset = offset

    # ------------------------------------------------------------------ files

    @staticmethod
    def _delete_file(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"failed to delete producer snapshot {path}: {exc}") from exc

    def _remove_stale_tmp_files(self) -> None:
        # A crash between writing and renaming a snapshot leaves `X.snapshot.tmp` behind.
        try:
            names = [
                p for p in self.partition_dir.iterdir() if p.name.endswith(".snapshot" + TMP_SUFFIX)
            ]
        except FileNotFoundError:
            return
        for path in names:
            self._delete_file(path)


def _in_open_txn(entry: ProducerStateEntry, dup: BatchMetadata) -> bool:
    """Whether `dup`, a batch a producer's new transactional batch repeats the
    sequences of, lies in the transaction the producer has open on this partition —
    the only place a true retry of a transactional batch can find its first copy.
    A match before that (a transaction a marker has ended since) is a client reusing
    the sequences of a batch it gave up on: librdkafka does, after an abort that
    purged a batch in flight, without an epoch bump. Answered as a duplicate, as
    Kafka answers it, the new transaction's record is acknowledged at the old
    aborted batch's offset and never written (a lost committed write, seen in the
    one-way chaos scenario on compose); refused with OUT_OF_ORDER_SEQUENCE_NUMBER
    (nothing written), librdkafka aborts the transaction and bumps its epoch."""
    first = entry.current_txn_first_offset
    return first is not None and dup.first_offset >= first
