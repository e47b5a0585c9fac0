"""The sink's exactly-once mode (option `transactionalIdPrefix`): a two-phase commit
of Kafka transactions, prepared by the tasks and committed by the driver.

Task (executor): transactional id `<prefix>-<partition id>`; init_transactions
fences an earlier attempt of the same task (its open transaction is aborted);
streaming, it then reads the id's marker (below) and, if this micro-batch's
transaction was committed before, writes nothing. Otherwise it begins a
transaction, sends its rows, adds the marker, flushes and leaves the transaction
open (prepare_transaction, KIP-939's name): its WriterCommitMessage carries the
transactional id, producer id and epoch. Arrow batches are encoded and sent as in
the at-least-once mode (batch_sender.py, with the transactional id); PySpark 4.0's
Rows go through seglog's Producer.

Driver: commit() ends each prepared transaction with EndTxn(commit) (the
coordinator checks the ids and epoch, not the connection: client/
transaction_manager.end_transaction); abort() with EndTxn(abort).

The marker: each streaming task's transaction also commits, with
TxnOffsetCommit, the offset `batchId + 1` with the query's id as metadata to the
consumer group named like the transactional id (on the first partition the task
wrote). It becomes visible with the task's records or not at all, so a task of a
micro-batch re-run after the driver died between the sink's commit and Spark's
commit log (or between two of its EndTxns) finds its own batch committed and
skips it, while the tasks whose transactions were aborted write again. Spark
hands each task of a re-run micro-batch the same rows (the offsets log fixes the
source's ranges; the plan is deterministic); a query whose partitioning is not
deterministic cannot be made exactly-once this way (docs/pipeline.md).

Batch (non-streaming) writes: one transaction per task, committed by the driver
after every task succeeded; no marker (a re-run job is a new write).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from seglog.client.admin import Admin
from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError
from seglog.client.group_coordinator import OffsetAndMetadata
from seglog.client.producer import Producer
from seglog.client.transaction_manager import PreparedTxnState, end_transaction

from .batch_sender import BatchSender
from .options import SinkOptions
from .record_sender import RecordSender
from .shared_metadata import shared_metadata

_log = logging.getLogger(__name__)

# Spark's local properties of a micro-batch's jobs (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY), which reach every task's TaskContext. The query
# id is kept in the checkpoint, so it is the same after a restart from it.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass
class PreparedWrite(WriterCommitMessage):
    """A task's transaction, written and flushed, left open for the driver."""

    transactional_id: str
    producer_id: int
    epoch: int
    records: int


@dataclass
class SkippedWrite(WriterCommitMessage):
    """A task of a re-run micro-batch whose transaction for it was committed before."""

    transactional_id: str
    batch_id: int
    records: int = 0


@dataclass
class EmptyWrite(WriterCommitMessage):
    """A task without rows: no transaction."""

    records: int = 0


@dataclass(frozen=True)
class TaskIdentity:
    partition_id: int
    query_id: str | None = None  # streaming only
    batch_id: int | None = None


def current_task(streaming: bool) -> TaskIdentity:
    """The Spark task this runs in: its partition id and, streaming, the query's id
    and the micro-batch's id (the Python writer's write() is not given them)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("the seglog sink's exactly-once mode writes inside Spark tasks only")
    if not streaming:
        return TaskIdentity(tc.partitionId())
    query_id = tc.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = tc.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        raise RuntimeError(
            f"the seglog sink's exactly-once mode needs Spark's local properties "
            f"{QUERY_ID_PROPERTY} and {BATCH_ID_PROPERTY} in its tasks; got "
            f"{query_id!r} and {batch_id!r}"
        )
    return TaskIdentity(tc.partitionId(), query_id, int(batch_id))


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def last_committed_batch(options: SinkOptions, group_id: str, query_id: str) -> int | None:
    """The last micro-batch of query `query_id` whose transaction with this id was
    committed (its marker), or None. Stable offsets only: one pending in an open
    transaction is asked for again until that transaction ends."""
    timeout_ms = int(options.producer_config.get("request_timeout_ms", 30_000))
    with Admin(options.bootstrap_servers, request_timeout_ms=timeout_ms) as admin:
        offsets = admin.list_consumer_group_offsets(group_id, require_stable=True)
    # Another query that used the same prefix left markers with its own id: not ours.
    return max((om.offset - 1 for om in offsets.values() if om.metadata == query_id), default=None)


class _RowWriter:
    """Rows (PySpark 4.0's streaming writers) through seglog's Producer."""

    def __init__(self, options: SinkOptions, txn_id: str) -> None:
        self.producer = Producer(
            options.bootstrap_servers, transactional_id=txn_id, **options.producer_config
        )
        self.sender = RecordSender(options, self.producer)
        self.first: Any = None

    def init_transactions(self) -> None:
        self.producer.init_transactions()

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def write(self, row: Any) -> None:
        future = self.sender.send_row(row.asDict(recursive=True))
        self.first = self.first or future

    def first_partition(self) -> TopicPartition:
        written = self.first.get(self.producer.max_block_s)
        return TopicPartition(written.topic, written.partition)

    def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None:
        self.producer.send_offsets_to_transaction(offsets, group_id)

    def prepare_transaction(self) -> PreparedTxnState:
        prepared = self.producer.prepare_transaction()
        self.sender.check()
        return prepared

    def abort_transaction(self) -> None:
        self.producer.abort_transaction()

    @property
    def records(self) -> int:
        return self.sender.sent

    def close(self) -> None:
        self.producer.close()


class _ArrowWriter:
    """Arrow batches encoded as the at-least-once path encodes them (batch_sender.py),
    sent in the transaction."""

    def __init__(self, options: SinkOptions, txn_id: str) -> None:
        self.sender = BatchSender(options, transactional_id=txn_id)
        self.init_transactions = self.sender.init_transactions
        self.begin_transaction = self.sender.begin_transaction
        self.send_offsets_to_transaction = self.sender.send_offsets_to_transaction
        self.prepare_transaction = self.sender.prepare_transaction
        self.abort_transaction = self.sender.abort_transaction
        self.write = self.sender.write
        self.close = self.sender.close

    def first_partition(self) -> TopicPartition:
        assert self.sender.first_partition is not None
        return self.sender.first_partition

    @property
    def records(self) -> int:
        return self.sender.sent


def write_transaction(
    options: SinkOptions, task: TaskIdentity, items: Iterable[Any], arrow: bool = True
) -> WriterCommitMessage:
    """One task's Arrow batches (or Rows) in one transaction, prepared and left open
    for the driver."""
    assert options.transactional_id_prefix is not None
    it = iter(items)
    first = next((x for x in it if not arrow or x.num_rows), None)
    if first is None:
        return EmptyWrite()
    txn_id = transactional_id(options.transactional_id_prefix, task.partition_id)
    writer: _ArrowWriter | _RowWriter = (
        _ArrowWriter(options, txn_id) if arrow else _RowWriter(options, txn_id)
    )
    began = False
    try:
        writer.init_transactions()  # fences (aborts) an earlier attempt of this task
        if task.batch_id is not None and task.query_id is not None:
            done = last_committed_batch(options, txn_id, task.query_id)
            if done is not None and done >= task.batch_id:
                _log.info("%s: micro-batch %d was committed before; skipped", txn_id, done)
                return SkippedWrite(txn_id, task.batch_id)
        writer.begin_transaction()
        began = True
        writer.write(first)
        for item in it:
            writer.write(item)
        if task.batch_id is not None and task.query_id is not None:
            marker = OffsetAndMetadata(task.batch_id + 1, task.query_id)
            writer.send_offsets_to_transaction({writer.first_partition(): marker}, txn_id)
        prepared = writer.prepare_transaction()
        return PreparedWrite(txn_id, prepared.producer_id, prepared.epoch, writer.records)
    except BaseException:
        if began:
            try:  # the next attempt's init_transactions would abort it anyway
                writer.abort_transaction()
            except Exception as e:  # noqa: BLE001 - the task's own error matters more
                _log.warning("%s: aborting after a failed write: %s", txn_id, e)
        raise
    finally:
        writer.close()


def end_prepared(
    options: SinkOptions, messages: Iterable[WriterCommitMessage | None], commit: bool, what: str
) -> int:
    """The driver's phase two: EndTxn for every prepared transaction. A commit tries
    all of them before it raises for the ones that failed (each one committed is one
    fewer to write again when the micro-batch is re-run). Returns the records made
    visible (commit) or taken back (abort)."""
    prepared = [m for m in messages if isinstance(m, PreparedWrite)]
    cfg = options.producer_config
    request_timeout_ms = int(cfg.get("request_timeout_ms", 30_000))
    metadata = shared_metadata(options.bootstrap_servers, request_timeout_ms)
    failed: list[str] = []
    for m in prepared:
        state = PreparedTxnState(m.transactional_id, m.producer_id, m.epoch)
        try:
            end_transaction(
                metadata, state, commit, int(cfg.get("max_block_ms", 60_000)) / 1000,
                request_timeout_ms / 1000, int(cfg.get("retry_backoff_ms", 100)) / 1000,
            )  # fmt: skip
        except KafkaError as e:
            ids = f"producer id {m.producer_id}, epoch {m.epoch}"
            failed.append(f"{m.transactional_id} ({ids}): {e}")
    if failed and commit:
        raise RuntimeError(
            f"{what}: {len(failed)} of {len(prepared)} transactions could not be committed "
            f"(a transaction open longer than kafka.transaction.timeout.ms is aborted by its "
            f"coordinator): " + "; ".join(failed)
        )
    for f in failed:
        _log.warning("%s: aborting %s", what, f)
    return sum(m.records for m in prepared)
