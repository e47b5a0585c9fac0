"""Where a node's Raft state lives on disk, as KRaft keeps it in `__cluster_metadata-0/`:

- the entries in seglog's own log: entry index i is the record at offset i-1,
  one batch per entry, its partitionLeaderEpoch the entry's term;
- `quorum-state`: the term and vote, JSON, replaced atomically (and fsynced)
  before any vote or append acknowledgement leaves the node;
- snapshots as `<index 20 digits>-<term 10 digits>.checkpoint` files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from seglog.controller.raft import Entry, HardState, PersistentState, Ready, Snapshot
from seglog.storage.atomic_file import write_atomically
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

QUORUM_STATE = "quorum-state"
SNAPSHOT_SUFFIX = ".checkpoint"
METADATA_LOG_CONFIG = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "segment.bytes": str(64 << 20),
}
# Snapshots kept besides the newest: a little history helps debugging.
SNAPSHOTS_KEPT = 2


class RaftStorage:
    def __init__(self, partition_dir: Path, clean: bool) -> None:
        self.dir = partition_dir
        config = LogConfig.defaults().with_overrides(METADATA_LOG_CONFIG)
        self.log = Log.open(partition_dir, config, had_clean_shutdown=clean)

    # --- loading ---------------------------------------------------------------------

    def load(self) -> PersistentState:
        term, voted_for = 0, None
        path = self.dir / QUORUM_STATE
        if path.exists():
            state = json.loads(path.read_text())
            term = int(state["leaderEpoch"])
            voted = int(state.get("votedId", -1))
            voted_for = voted if voted >= 0 else None
        snapshot = self._latest_snapshot()
        start = snapshot.index if snapshot is not None else 0
        entries: list[Entry] = []
        offset = max(start, self.log.log_start_offset)
        # Bounded by the log end offset: every read moves past at least one batch.
        while offset < self.log.log_end_offset:
            chunk = self.log.read(offset, 4 << 20).records
            if not chunk:
                break
            for pos, header in iter_batches(chunk):
                if header.base_offset >= offset:
                    (record,) = decode_records(chunk, pos, header)
                    entries.append(
                        Entry(record.offset + 1, header.partition_leader_epoch, record.value or b"")
                    )
                offset = header.next_offset
        if entries and entries[0].index != start + 1:
            raise RuntimeError(
                f"metadata log {self.dir} starts at entry {entries[0].index}, "
                f"but its snapshot ends at {start}"
            )
        return PersistentState(term, voted_for, snapshot, tuple(entries))

    def _snapshots(self) -> list[tuple[int, int, Path]]:
        out = []
        for path in self.dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            index, sep, term = stem.partition("-")
            if sep and index.isdigit() and term.isdigit():
                out.append((int(index), int(term), path))
        return sorted(out)

    def _latest_snapshot(self) -> Snapshot | None:
        snaps = self._snapshots()
        if not snaps:
            return None
        index, term, path = snaps[-1]
        return Snapshot(index, term, path.read_bytes())

    # --- persisting a Ready ------------------------------------------------------------

    def persist(self, rd: Ready) -> None:
        """Everything a Ready asks to be durable, fsynced, before its messages go out."""
        if rd.snapshot is not None:
            self._write_snapshot(rd.snapshot)
        if rd.truncate_from is not None:
            offset = rd.truncate_from - 1
            if offset < self.log.log_start_offset:
                self.log.truncate_fully_and_start_at(offset)
            else:
                self.log.truncate_to(offset)
        for entry in rd.entries:
            expected = entry.index - 1
            if self.log.log_end_offset != expected:
                # A snapshot or truncation moved the log: restart it at the entry.
                self.log.truncate_fully_and_start_at(expected)
            batch = build_batch([NewRecord(entry.data)])
            self.log.append_as_leader(batch, entry.term)
        if rd.entries or rd.truncate_from is not None or rd.snapshot is not None:
            self.log.flush()
            self.log.update_high_watermark(self.log.log_end_offset)
        if rd.hard_state is not None:
            self._write_hard_state(rd.hard_state)

    def _write_hard_state(self, hs: HardState) -> None:
        body = {
            "leaderEpoch": hs.term,
            "votedId": -1 if hs.voted_for is None else hs.voted_for,
            "data_version": 0,
        }
        write_atomically(self.dir / QUORUM_STATE, json.dumps(body).encode())

    def _write_snapshot(self, snap: Snapshot) -> None:
        name = f"{snap.index:020d}-{snap.term:010d}{SNAPSHOT_SUFFIX}"
        write_atomically(self.dir / name, snap.data)
        # Entries up to the snapshot are no longer needed.
        if self.log.log_end_offset < snap.index:
            self.log.truncate_fully_and_start_at(snap.index)
        for _index, _term, path in self._snapshots()[: -SNAPSHOTS_KEPT - 1]:
            path.unlink(missing_ok=True)

    def compact_to(self, index: int) -> None:
        """After the core compacted to `index`: drop whole segments below it."""
        if index - 1 <= self.log.log_start_offset or index > self.log.log_end_offset:
            return
        self.log.update_high_watermark(self.log.log_end_offset)
        self.log.maybe_increment_log_start_offset(index)
        self.log.delete_old_segments()

    def close(self) -> None:
        self.log.close()
        try:
            fd = os.open(self.dir, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        except OSError:
            pass


def read_entries(partition_dir: Path) -> list[tuple[Entry, int]]:
    """Every entry in the metadata log's segment files, with its append time (ms), read
    without opening the log: for tools and tests looking at a running node's log. A
    partial batch at a segment's end (being written) is left out; a corrupt one raises."""
    out: list[tuple[Entry, int]] = []
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        for pos, header in iter_batches(data):
            (record,) = decode_records(data, pos, header)
            entry = Entry(record.offset + 1, header.partition_leader_epoch, record.value or b"")
            out.append((entry, header.max_timestamp))
    return out
