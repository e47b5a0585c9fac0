"""What the data path's requests ask of a partition and what they answer: a
produce's result, a fetch's position and result, an offset lookup's result. Both
listeners (gRPC and Kafka), the fetch sessions and the replica manager speak them;
the data path reports what it did to a `ReplicaMetrics`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from seglog.storage.file_slice import FileSlice
from seglog.storage.txn_index import AbortedTxn


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_name: str = "NONE"
    error_message: str = ""
    record_errors: tuple[tuple[int, str], ...] = ()  # KIP-467, with INVALID_RECORD


@dataclass(frozen=True, slots=True)
class FetchSpec:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    max_bytes: int = 1 << 20
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    read_committed: bool = False  # a consumer's isolation_level 1 (READ_COMMITTED)


@dataclass(slots=True)
class FetchResult:
    topic: str
    partition: int
    error_name: str = "NONE"
    error_message: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | FileSlice = b""  # a FileSlice from a zero_copy fetch
    leader: tuple[int, int] = field(default=(-1, -1))
    diverging_epoch: tuple[int, int] | None = None
    last_stable_offset: int = -1  # a consumer's read: the partition's LSO
    # READ_COMMITTED: the aborted transactions the records overlap (None otherwise)
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class OffsetResult:
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error_name: str = "NONE"
    error_message: str = ""


class ReplicaMetrics(Protocol):
    """Where the data path reports what it did (node/metrics.py)."""

    def appended(self, topic: str, batch_bytes: int, records: int) -> None: ...
    def sent(self, topic: str, batch_bytes: int) -> None: ...
    def isr_changed(self, before: int, after: int) -> None: ...
