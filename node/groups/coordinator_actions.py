"""What the group coordinator decides, as actions for its caller to carry out:
`Respond` (the answer to a request, now or later: a JoinGroup waits for the
rebalance, a SyncGroup for the leader's assignment) and `Append` (records for the
shard's `__consumer_offsets` partition). `ShardActions` collects one shard's actions
until they are taken, and keeps each append in flight with what is to happen once its
outcome is known."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from seglog.storage.txn_verification import VerificationGuard

from .group_errors import NOT_COORDINATOR
from .group_messages import Result

Record = tuple[bytes, bytes | None]  # key, value (None: a tombstone)
WriteDone = Callable[[str, int], None]  # (append error, now_ms)

MAX_PENDING_WRITES = 10_000  # a shard's appends in flight; beyond: COORDINATOR_NOT_AVAILABLE


@dataclass(frozen=True)
class Respond:
    request_id: int
    result: Result


@dataclass(frozen=True)
class Append:
    """Records for `__consumer_offsets`-`partition`, to append as leader of
    `leader_epoch` only (an append under another epoch must fail), with acks=all."""

    partition: int
    leader_epoch: int
    write_id: int
    records: tuple[Record, ...]
    # TxnOffsetCommit: (producer id, epoch) of the transaction the records belong to
    # (a transactional batch, made visible by its COMMIT marker; docs/transactions.md).
    producer: tuple[int, int] | None = None
    # KIP-890: the guard of the transaction's verification in this partition (None:
    # none needed), which the log checks again as it appends (docs/transactions.md).
    guard: VerificationGuard | None = None


Action = Respond | Append


class ShardActions:
    """One shard's actions not yet taken and its appends in flight."""

    def __init__(self, partition: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.writes: dict[int, WriteDone] = {}
        self._next_write = 0
        self._out: list[Action] = []

    def take(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def respond(self, request_id: int, result: Result) -> None:
        self._out.append(Respond(request_id, result))

    def append(
        self,
        records: Iterable[Record],
        done: WriteDone,
        producer: tuple[int, int] | None = None,
        guard: VerificationGuard | None = None,
    ) -> bool:
        """An append of `records` (in `producer`'s transaction, if given, verified with
        `guard`); `done` runs with its outcome. False (nothing appended) when too many
        are in flight already."""
        if len(self.writes) >= MAX_PENDING_WRITES:
            return False
        self._next_write += 1
        self.writes[self._next_write] = done
        self._out.append(
            Append(
                self.partition,
                self.leader_epoch,
                self._next_write,
                tuple(records),
                producer,
                guard,
            )
        )
        return True

    def write_done(self, write_id: int, error: str, now_ms: int) -> None:
        done = self.writes.pop(write_id, None)
        if done is not None:
            done(error, now_ms)

    def abandon_writes(self) -> None:
        """The shard is gone: its appends in flight are never acknowledged."""
        for write in list(self.writes.values()):
            write(NOT_COORDINATOR, -1)
        self.writes.clear()
