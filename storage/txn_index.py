"""The aborted-transaction index (`<base offset>.txnindex`), Kafka's TransactionIndex.

One file per segment, holding an entry for every transaction whose ABORT marker lies
in that segment, in marker order. Each entry is Kafka's AbortedTxn, 34 bytes, big-endian:

    int16 version = 0
    int64 producerId
    int64 firstOffset        the transaction's first data offset
    int64 lastOffset         the offset of its ABORT marker
    int64 lastStableOffset   the LSO once the marker was written: the first offset of
                             another producer's open transaction then, else lastOffset + 1

A read_committed Fetch asks every segment from the fetch offset's on for the aborted
transactions overlapping the fetched range (`collect`), stopping at the first entry
whose lastStableOffset reaches the fetch's upper bound: no transaction aborted later can
have started below it. The file is created with its first entry (Kafka creates it
lazily too), kept in memory once read (aborted transactions are few), written at each
ABORT marker's append, cut with the log on truncation and rebuilt by the producer-state
replay after an unclean shutdown (storage/log_txns.py).

A segment held in memory (the simulators') has an index without a file (`path` None).
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

from . import disk_and_clock
from .errors import CorruptIndexError, KafkaStorageError
from .mapped_index import rename_index_file

TXN_INDEX_VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    # An entry's lastStableOffset reached the upper bound: later segments need no look.
    complete: bool


def encode_entry(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(TXN_INDEX_VERSION, *txn)


def decode_entries(data: bytes | memoryview, source: str) -> list[AbortedTxn]:
    """The whole entries of an index image; a torn tail (a crash mid-append) is
    ignored, as Kafka derives the count from floor(length / 34). An unknown version
    raises CorruptIndexError naming `source`."""
    whole = len(data) - len(data) % ENTRY_SIZE
    found = []
    for version, pid, first, last, lso in ENTRY.iter_unpack(memoryview(data)[:whole]):
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index "
                f"{source}, current version is {TXN_INDEX_VERSION}"
            )
        found.append(AbortedTxn(pid, first, last, lso))
    return found


class TransactionIndex:
    """One segment's `.txnindex`. Not thread-safe: the partition lock serialises calls
    (a flush outside it only fsyncs)."""

    def __init__(self, start_offset: int, path: Path | None) -> None:
        self.start_offset = start_offset
        self.path = path
        self._entries: list[AbortedTxn] | None = None if path is not None else []
        self._fd: int | None = None

    # --- reading ----------------------------------------------------------------------

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (read from the file on first use)."""
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        assert self.path is not None
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise KafkaStorageError(f"cannot read transaction index {self.path}: {e}") from e
        entries = decode_entries(data, str(self.path))
        if len(data) % ENTRY_SIZE:
            # A torn append: cut the file back to its whole entries before appending.
            self._truncate_file(len(entries) * ENTRY_SIZE)
        return entries

    @property
    def last_offset(self) -> int | None:
        entries = self.entries
        return entries[-1].last_offset if entries else None

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Kafka's collectAbortedTxns: the aborted transactions overlapping
        [fetch_offset, upper_bound_offset)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    # --- writing ----------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{entries[-1].last_offset} of index {self.path}"
            )
        if txn.last_offset < self.start_offset:
            raise ValueError(
                f"aborted transaction marker at {txn.last_offset} lies below the index's "
                f"segment, which starts at {self.start_offset}"
            )
        if self.path is not None:
            data = encode_entry(txn)
            try:
                fd = self._open()
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(f"short write: {written} of {len(data)} bytes")
            except OSError as e:
                raise KafkaStorageError(
                    f"cannot append to transaction index {self.path}: {e}"
                ) from e
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose marker lies at or after `offset`."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        if self.path is not None:
            self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry."""
        self.truncate_to(-1)

    def _open(self) -> int:
        if self._fd is None:
            assert self.path is not None
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _truncate_file(self, size: int) -> None:
        assert self.path is not None
        try:
            if self._fd is not None:
                os.ftruncate(self._fd, size)
            elif self.path.exists():
                os.truncate(self.path, size)
        except OSError as e:
            raise KafkaStorageError(f"cannot truncate transaction index {self.path}: {e}") from e

    # --- lifecycle --------------------------------------------------------------------

    def flush(self) -> None:
        if self._fd is None:
            return
        try:
            disk_and_clock.disk_fsync(self._fd)
        except OSError as e:
            raise KafkaStorageError(f"cannot fsync {self.path}: {e}") from e

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to(self, path: Path) -> None:
        """Follow the segment's files to a new name (`.deleted`, `.swap`); the open
        descriptor keeps working, a missing file is no error."""
        if self.path is None:
            return
        rename_index_file(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path}, entries={len(self.entries)})"
