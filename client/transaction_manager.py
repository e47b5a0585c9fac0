"""The transactional producer's side of Kafka's transactions (Kafka's
TransactionManager), over gRPC (proto/transactions.proto; docs/transactions.md).

The application thread drives it: `init_transactions` finds the transactional id's
coordinator (FindCoordinator, key type 1) and takes a producer id and epoch
(InitProducerId with the id, which fences every older producer with it);
`begin` opens a transaction locally; the first record for a partition adds the
partition to the transaction (AddPartitionsToTxn) before it is queued, so the
coordinator knows every partition it must write a marker to; `send_offsets` adds the
group (AddOffsetsToTxn) and commits the offsets in the transaction at the group's
coordinator (TxnOffsetCommit); `end` sends EndTxn.

Errors as Kafka's: PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH from a partition the
new epoch's marker reached) is fatal, raised as ProducerFencedError by every later
call; a record that failed to be delivered makes the transaction abortable only
(commit raises, abort works, and the epoch is bumped after it so sequences restart)."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2
from seglog.proto import groups_pb2 as gpb
from seglog.proto import transactions_pb2 as tpb

from .cluster import ClusterMetadata, TopicPartition, call
from .errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    error_class,
    error_name,
    for_code,
)
from .group_coordinator import OffsetAndMetadata

E = errors_pb2.ErrorCode
T = TypeVar("T")
ProducerFencedError = error_class("PRODUCER_FENCED")
TRANSACTION_KEY = 1
# Errors after which the producer may not go on: a newer producer owns the id, or
# the coordinator refuses the id for good (Kafka's fatal errors).
FATAL = {
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_TXN_STATE",
    "INVALID_TRANSACTION_TIMEOUT",
    "CLUSTER_AUTHORIZATION_FAILED",
}
# A newer producer with the id: fatal, raised as ProducerFencedError.
FENCING = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
# The coordinator is elsewhere (or not up yet): find it again, then retry.
MOVED = {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "NETWORK_EXCEPTION"}


class ConsumerGroupMetadata(NamedTuple):
    """Kafka's ConsumerGroupMetadata: what TxnOffsetCommit checks of the consumer
    (Consumer.group_metadata()); with a group id alone the member is not checked."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class PreparedTxnState(NamedTuple):
    """Kafka's PreparedTxnState (KIP-939): what another process needs to end a
    transaction this producer prepared (`end_transaction`)."""

    transactional_id: str
    producer_id: int
    epoch: int


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED = "PREPARED"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TransactionManager:
    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        metadata: ClusterMetadata,
        request_timeout_s: float,
        retry_backoff_s: float,
        set_producer: Callable[[int, int], None],
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.metadata = metadata
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s or 0.05
        self._set_producer = set_producer  # hands the id and epoch to the sender
        self._lock = threading.Lock()  # one transactional call at a time
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: set[TopicPartition] = set()  # added to the open transaction
        self._offsets_added = False
        self._fatal: KafkaError | None = None
        self._abortable: BaseException | None = None
        self._coordinator: tuple[str, int] | None = None
        self._find_turn = 0

    # --- state --------------------------------------------------------------------------

    def _require(self, *states: TxnState, what: str) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self.state not in states:
            wanted = " or ".join(s.value for s in states)
            raise IllegalStateError(
                f"{what} needs the transactional producer {self.transactional_id!r} in state "
                f"{wanted}; it is {self.state.value}"
            )

    def check_send(self) -> None:
        """send() of a transactional producer: only inside a transaction."""
        if self._fatal is not None:
            raise self._fatal
        if self.state is TxnState.ABORTABLE_ERROR:
            raise KafkaError(
                f"transaction of {self.transactional_id!r} failed ({self._abortable}); "
                f"call abort_transaction()"
            )
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError(
                f"send() of the transactional producer {self.transactional_id!r} needs "
                f"begin_transaction() first (state {self.state.value})"
            )

    def batch_failed(self, error: BaseException) -> BaseException:
        """The sender fails a batch of the open transaction (its thread): fenced, the
        producer is done and the batch fails with ProducerFencedError; otherwise the
        transaction can only be aborted. Returns what the batch fails with."""
        name = getattr(error, "message", "")
        cause = error.__cause__
        if name in FENCING or getattr(cause, "message", "") in FENCING:
            fenced = self._fence("PRODUCER_FENCED", str(error))
            return fenced
        if self._abortable is None:
            self._abortable = error
        if self.state is TxnState.IN_TRANSACTION:
            self.state = TxnState.ABORTABLE_ERROR
        return error

    def _fence(self, name: str, detail: str) -> KafkaError:
        if self._fatal is None:
            cls = (
                ProducerFencedError
                if name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
                else None
            )
            message = (
                f"the producer with transactional id {self.transactional_id!r} (producer id "
                f"{self.producer_id}, epoch {self.producer_epoch}) was fenced: a newer producer "
                f"with the same transactional_id took over, or its transaction timed out "
                f"({name}: {detail})"
                if cls is not None
                else f"transactional id {self.transactional_id!r}: {detail}"
            )
            self._fatal = (cls or error_class(name))(message)
            self.state = TxnState.FATAL_ERROR
        return self._fatal

    # --- requests with retries ------------------------------------------------------------

    def _coordinator_address(self, deadline: float) -> tuple[str, int]:
        """The transactional id's coordinator's address, asked of the nodes in turn."""
        while self._coordinator is None:
            known = self.metadata.broker_addresses()
            candidates = known + [a for a in self.metadata.bootstrap if a not in known]
            address = candidates[self._find_turn % len(candidates)]
            request = gpb.FindCoordinatorRequest(
                key=self.transactional_id, key_type=TRANSACTION_KEY
            )
            try:
                stub = self.metadata.connections.group_stub(address)
                r = call(stub.FindCoordinator, request, self.request_timeout_s)
                if r.error_code == E.NONE:
                    self._coordinator = (r.host, r.port)
                    break
                error: KafkaError = for_code(r.error_code, r.error_message)
            except KafkaError as e:
                error = e
            self._find_turn += 1
            if not error.retriable:
                raise error
            self._pause(deadline, error, "finding the transaction coordinator")
        return self._coordinator

    def _pause(self, deadline: float, error: BaseException, what: str) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"{what} for transactional id {self.transactional_id!r} did not finish in time; "
                f"last error: {error}"
            ) from error
        time.sleep(min(self.retry_backoff_s, remaining))

    def _at_coordinator(
        self, deadline: float, what: str, send: Callable[[Any], tuple[str, str, T]]
    ) -> T:
        """`send(stubs)` at the coordinator until it answers NONE: retriable errors
        (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, a moved coordinator)
        are retried until `deadline`; fatal ones fence the producer."""
        while True:
            address = self._coordinator_address(deadline)
            try:
                name, detail, result = send(address)
            except NodeNotReadyError as e:
                name, detail, result = "NETWORK_EXCEPTION", str(e), None  # type: ignore[assignment]
            except KafkaTimeoutError as e:
                name, detail, result = "REQUEST_TIMED_OUT", str(e), None  # type: ignore[assignment]
            if name == "NONE":
                return result
            if name in FATAL:
                raise self._fence(name, detail or name)
            if name in MOVED:
                self._coordinator = None
            error = error_class(name)(detail or name)
            if not error.retriable:
                raise error
            self._pause(deadline, error, what)

    def _stub(self, address: tuple[str, int]) -> Any:
        return self.metadata.connections.txn_stub(address)

    # --- the calls ---------------------------------------------------------------------

    def init_transactions(self, timeout_s: float) -> None:
        with self._lock:
            self._require(TxnState.UNINITIALIZED, TxnState.READY, what="init_transactions()")
            self._init_producer_id(time.monotonic() + timeout_s, bump=False)
            self.state = TxnState.READY

    def _init_producer_id(self, deadline: float, bump: bool) -> None:
        # A bump names the current id and epoch (KIP-360): only this producer may bump.
        request = pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else -1,
            producer_epoch=self.producer_epoch if bump else -1,
        )

        def send(address: tuple[str, int]) -> tuple[str, str, pb.InitProducerIdResponse]:
            r = call(self.metadata.connections.stub(address).InitProducerId, request,
                     self.request_timeout_s)  # fmt: skip
            return error_name(r.error_code), r.error_message, r

        r = self._at_coordinator(deadline, "InitProducerId", send)
        self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch
        self._set_producer(r.producer_id, r.producer_epoch)

    def begin(self) -> None:
        with self._lock:
            self._require(TxnState.READY, what="begin_transaction()")
            self.partitions.clear()
            self._offsets_added = False
            self._abortable = None
            self.state = TxnState.IN_TRANSACTION

    def add_partition(self, tp: TopicPartition, timeout_s: float) -> None:
        """Before the first record of `tp` in this transaction is queued."""
        if tp in self.partitions:
            return
        with self._lock:
            self.check_send()
            if tp in self.partitions:
                return
            request = tpb.AddPartitionsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                topics=[tpb.TxnTopic(name=tp.topic, partitions=[tp.partition])],
            )

            def send(address: tuple[str, int]) -> tuple[str, str, None]:
                r = call(self._stub(address).AddPartitionsToTxn, request, self.request_timeout_s)
                for result in r.results:
                    if result.error_code != E.NONE:
                        return error_name(result.error_code), result.error_message, None
                return "NONE", "", None

            self._at_coordinator(time.monotonic() + timeout_s, "AddPartitionsToTxn", send)
            self.partitions.add(tp)

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        timeout_s: float,
    ) -> None:
        with self._lock:
            self._require(TxnState.IN_TRANSACTION, what="send_offsets_to_transaction()")
            deadline = time.monotonic() + timeout_s
            add = tpb.AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=group.group_id,
            )

            def send_add(address: tuple[str, int]) -> tuple[str, str, None]:
                r = call(self._stub(address).AddOffsetsToTxn, add, self.request_timeout_s)
                return error_name(r.error_code), r.error_message, None

            self._at_coordinator(deadline, "AddOffsetsToTxn", send_add)
            self._offsets_added = True
            self._txn_offset_commit(offsets, group, deadline)

    def _txn_offset_commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        deadline: float,
    ) -> None:
        """TxnOffsetCommit at the group's coordinator (found as a consumer finds it)."""
        topics: dict[str, tpb.TxnOffsetCommitTopic] = {}
        for tp, om in offsets.items():
            t = topics.setdefault(tp.topic, tpb.TxnOffsetCommitTopic(name=tp.topic))
            t.partitions.add(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        request = tpb.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id or "",
            topics=list(topics.values()),
        )
        find = gpb.FindCoordinatorRequest(key=group.group_id, key_type=0)
        turn = 0
        while True:
            candidates = self.metadata.broker_addresses() or list(self.metadata.bootstrap)
            try:
                where = call(
                    self.metadata.connections.group_stub(candidates[turn % len(candidates)])
                    .FindCoordinator, find, self.request_timeout_s,
                )  # fmt: skip
                if where.error_code != E.NONE:
                    raise for_code(where.error_code, where.error_message)
                r = call(self._stub((where.host, where.port)).TxnOffsetCommit, request,
                         self.request_timeout_s)  # fmt: skip
                failed = [x for x in r.results if x.error_code != E.NONE]
                if not failed:
                    return
                name = error_name(failed[0].error_code)
                if name in FATAL:
                    raise self._fence(name, failed[0].error_message)
                error: KafkaError = for_code(failed[0].error_code, failed[0].error_message)
            except KafkaError as e:
                if e is self._fatal:
                    raise
                error = e
            turn += 1
            if not error.retriable:
                raise error
            self._pause(deadline, error, "TxnOffsetCommit")

    def prepare(self, flush: Callable[[], None]) -> PreparedTxnState:
        """KIP-939's prepareTransaction: every record delivered (a failed one raises),
        the transaction left open for `end_transaction` elsewhere. Only a transaction
        with records or offsets can be prepared (an empty one has nothing to end)."""
        with self._lock:
            self._require(TxnState.IN_TRANSACTION, what="prepare_transaction()")
            if not (self.partitions or self._offsets_added):
                raise IllegalStateError(
                    f"prepare_transaction() of {self.transactional_id!r}: the transaction has "
                    f"no records or offsets"
                )
        flush()
        with self._lock:
            if self._fatal is not None:
                raise self._fatal
            if self.state is TxnState.ABORTABLE_ERROR:
                raise KafkaError(
                    f"cannot prepare: a record of the transaction failed ({self._abortable})"
                )
            self.state = TxnState.PREPARED
            return PreparedTxnState(self.transactional_id, self.producer_id, self.producer_epoch)

    def end(self, commit: bool, flush: Callable[[], None], timeout_s: float) -> None:
        """commit_transaction / abort_transaction: every record of the transaction is
        delivered (flush) first; a commit with a failed record raises it (abort then)."""
        with self._lock:
            what = "commit_transaction()" if commit else "abort_transaction()"
            if commit:
                self._require(
                    TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.PREPARED, what=what
                )
                if self.state is TxnState.ABORTABLE_ERROR:
                    raise KafkaError(
                        f"cannot commit: a record of the transaction failed "
                        f"({self._abortable}); call abort_transaction()"
                    )
            else:
                self._require(
                    TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.PREPARED, what=what
                )
            deadline = time.monotonic() + timeout_s
        flush()  # outside the lock: the sender's failures report through batch_failed
        with self._lock:
            if self._fatal is not None:
                raise self._fatal
            if commit and self.state is TxnState.ABORTABLE_ERROR:
                raise KafkaError(
                    f"cannot commit: a record of the transaction failed ({self._abortable}); "
                    f"call abort_transaction()"
                )
            if self.partitions or self._offsets_added:
                self._end_txn(deadline, commit)
            if self._abortable is not None:
                # A failed batch leaves the partitions' sequences unknown: a new epoch
                # starts them again at 0 (KIP-360's bump, by this producer's id and epoch).
                self._init_producer_id(deadline, bump=True)
            self.partitions.clear()
            self._offsets_added = False
            self._abortable = None
            self.state = TxnState.READY

    def _end_txn(self, deadline: float, commit: bool) -> None:
        """EndTxn for this producer id and epoch, at the coordinator, until `deadline`."""
        request = tpb.EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            committed=commit,
        )

        def send(address: tuple[str, int]) -> tuple[str, str, None]:
            r = call(self._stub(address).EndTxn, request, self.request_timeout_s)
            return error_name(r.error_code), r.error_message, None

        self._at_coordinator(deadline, "EndTxn", send)


def end_transaction(
    metadata: ClusterMetadata,
    prepared: PreparedTxnState,
    commit: bool,
    timeout_s: float,
    request_timeout_s: float = 30.0,
    retry_backoff_s: float = 0.1,
) -> None:
    """EndTxn for a transaction another process prepared (a two-phase commit's second
    phase, as the Spark sink's driver does it). The coordinator checks only the
    transactional id, producer id and epoch, not who asks. Ending it again the same
    way (a retry after a lost answer) succeeds; PRODUCER_FENCED (ProducerFencedError)
    means a newer producer took the id or the coordinator aborted the transaction on
    its transaction.timeout.ms."""
    tm = TransactionManager(
        prepared.transactional_id, 1, metadata, request_timeout_s, retry_backoff_s,
        lambda _pid, _epoch: None,
    )  # fmt: skip
    tm.producer_id, tm.producer_epoch = prepared.producer_id, prepared.epoch
    tm._end_txn(time.monotonic() + timeout_s, commit)
