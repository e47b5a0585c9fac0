"""The I/O shell of KIP-890's verification at a partition leader (Kafka's
AddPartitionsToTxnManager): the pure `TxnVerifications` (txn_verification.py) under a
lock, a small pool that sends each coordinator node its batch — AddPartitionsToTxn v5
with VerifyOnly on its Kafka listener (the listener, TLS and SASL login of the
coordinator's WriteTxnMarkers, node/transactions/marker_wire.py; CLUSTER_ACTION at the
coordinator), or a direct call when the coordinator is this node — and a timer thread
that answers the questions past their deadline. Nothing here blocks a caller: `verify`
queues and returns, and the callback runs on a pool or timer thread.

`start_verification` is what both produce paths (the Kafka listener's, on the event
loop, and the gRPC service's) call before they append: which partitions need asking,
their guards, and the Produce errors of those that failed. `start_offsets_verification`
is the group coordinator's, before a TxnOffsetCommit's batch (offsets_verification.py)."""

from __future__ import annotations

import itertools
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.txn_verification import VerificationGuard

from ..event_log import EventLogger
from ..kafka.errors import error_name
from ..security.inter_broker_sasl import InterBrokerLogin, InterBrokerLoginError
from .marker_sender import AddressOf, _answer_body, log_in
from .txn_verification import (
    DEFAULT_ERROR,
    INVALID_PRODUCER_ID_MAPPING,
    NONE,
    Answer,
    MixedProducers,
    Question,
    Send,
    TopicPartition,
    TransactionSupportedOperation,
    TxnVerifications,
    produce_error,
    transactional_batches,
    txn_offset_commit_error,
)

_log = EventLogger("txn_verification")
# AddPartitionsToTxn as Kafka's brokers send it (AddPartitionsToTxnRequest.Builder.forBroker:
# the latest): v5, whose coordinator says TRANSACTION_ABORTABLE, which each question
# maps for its client (txn_verification.coordinator_error_at_leader).
VERSION = 5
REQUEST_ID = 1  # the request's correlation id (a login's follow it)
SENDERS = 4
# Questions waiting or in flight at once, every coordinator together; past it a
# Produce is refused NOT_ENOUGH_REPLICAS (retriable) instead of queued.
MAX_PENDING = 1_000
REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, the inter-broker send's bound

Verified = Callable[[dict[TopicPartition, str]], None]  # the unverified partitions' errors
LocalVerify = Callable[[str, int, int, Sequence[TopicPartition]], dict[TopicPartition, str]]


def now_ms() -> int:
    return int(plain_monotonic_s() * 1000)


class VerificationSender:
    def __init__(
        self,
        node_id: int,
        coordinator_of: Callable[[str], int],
        local_verify: LocalVerify,
        kafka_address_of: AddressOf,
        ssl_context: ssl.SSLContext | None = None,
        login: InterBrokerLogin | None = None,
        login_unavailable: str | None = None,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.node_id = node_id
        self.coordinator_of = coordinator_of  # the transactional id's coordinator, or -1
        self.local_verify = local_verify
        self.kafka_address_of = kafka_address_of
        self.ssl_context = ssl_context
        self.login = login
        self.login_unavailable = login_unavailable
        self._state = TxnVerifications(max_pending)
        # Each answer's wait (ms) and failed partitions (the node's metrics).
        self.observer: Callable[[float, int], None] = lambda _ms, _failed: None
        self._callbacks: dict[int, tuple[Verified, int]] = {}
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="txn-verify")
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._timer = threading.Thread(target=self._expiry_loop, name="txn-verify-timer")
        self._timer.daemon = True
        self._timer.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- asking -----------------------------------------------------------------------

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        timeout_ms: int,
        done: Verified,
        operation: TransactionSupportedOperation = DEFAULT_ERROR,
    ) -> None:
        """Ask the id's coordinator whether `partitions` are in the producer's ongoing
        transaction; `done` gets the unverified ones and why (from another thread, or
        from this one when the question cannot be asked), within `timeout_ms` or
        REQUEST_TIMEOUT_MS, whichever is sooner; `operation`: what the asking
        request's version lets its client hear."""
        token = next(self._tokens)
        wait_ms = max(1, min(timeout_ms, REQUEST_TIMEOUT_MS))
        q = Question(
            token, transactional_id, producer_id, producer_epoch, tuple(partitions),
            now_ms() + wait_ms, operation,
        )  # fmt: skip
        coordinator = self.coordinator_of(transactional_id)
        with self._lock:
            self._callbacks[token] = (done, now_ms())
            answers = self._state.verify(q, coordinator)
            sends = self._state.ready()
        self._answer(answers)
        self._send_all(sends)
        self._wake.set()  # a new deadline

    def _answer(self, answers: list[Answer]) -> None:
        for a in answers:
            with self._lock:
                waiting = self._callbacks.pop(a.token, None)
            if waiting is not None:
                done, asked_ms = waiting
                self.observer(now_ms() - asked_ms, len(a.errors))
                try:
                    done(a.errors)
                except Exception:  # noqa: BLE001 - one produce's callback: the others go on
                    _log.error("txn_verification_callback_failed", exc=True)

    def _send_all(self, sends: list[Send]) -> None:
        for s in sends:
            try:
                self._pool.submit(self._send, s)
            except RuntimeError:  # shut down: the timer no longer runs either
                self._finish(s, None, "NETWORK_EXCEPTION")

    def _send(self, s: Send) -> None:
        try:
            if s.node == self.node_id:
                local = {
                    q.transactional_id: self.local_verify(
                        q.transactional_id, q.producer_id, q.producer_epoch, q.partitions
                    )
                    for q in s.questions
                }
                self._finish(s, local, NONE)
            else:
                remote, error = self._ask(s)
                self._finish(s, remote, error)
        except Exception:  # noqa: BLE001 - a bug: the questions fail, retriably
            _log.error("txn_verification_failed", exc=True, node=s.node)
            self._finish(s, None, "NETWORK_EXCEPTION")

    def _finish(
        self,
        s: Send,
        results: dict[str, dict[TopicPartition, str]] | None,
        error: str,
    ) -> None:
        with self._lock:
            answers = self._state.on_response(s.node, s.batch_id, results, error)
            sends = self._state.ready()
        self._answer(answers)
        self._send_all(sends)

    def _expiry_loop(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                deadline = self._state.next_deadline()
            wait_s = 1.0 if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            self._wake.wait(min(wait_s, 1.0))
            self._wake.clear()
            with self._lock:
                answers = self._state.expire(now_ms())
            if answers:
                _log.info("txn_verification_timed_out", questions=len(answers))
            self._answer(answers)

    # --- the wire ---------------------------------------------------------------------

    def _ask(self, s: Send) -> tuple[dict[str, dict[TopicPartition, str]] | None, str]:
        """One AddPartitionsToTxn VerifyOnly round trip: the per-id results, or the
        error every question gets (NETWORK_EXCEPTION when the node cannot be reached)."""
        if self.login_unavailable is not None:
            _log.error("txn_verification_login_failed", node=s.node, error=self.login_unavailable)
            return None, "NETWORK_EXCEPTION"
        address = self.kafka_address_of(s.node)
        if address is None:
            return None, "COORDINATOR_NOT_AVAILABLE"
        R = AddPartitionsToTxnRequest
        transactions = []
        for q in s.questions:
            topics: dict[str, list[int]] = {}
            for topic, partition in q.partitions:
                topics.setdefault(topic, []).append(partition)
            transactions.append(
                R.AddPartitionsToTxnTransaction(
                    transactional_id=q.transactional_id,
                    producer_id=q.producer_id,
                    producer_epoch=q.producer_epoch,
                    verify_only=True,
                    topics=[
                        R.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()
                    ],
                )
            )
        request = R[VERSION](transactions=transactions)
        client_id = f"broker-{self.node_id}-txn-verification"
        request.with_header(correlation_id=REQUEST_ID, client_id=client_id)
        sock: socket.socket | None = None
        try:
            sock = socket.create_connection(address, timeout=REQUEST_TIMEOUT_MS / 1000)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=address[0])
            if self.login is not None:
                self._log_in(sock, s.node, self.login, client_id)
            sock.sendall(bytes(request.encode(header=True, framed=True)))
            body = _answer_body(sock, REQUEST_ID, flexible=True)
            response = AddPartitionsToTxnResponse.decode(body, version=VERSION)
        except InterBrokerLoginError as e:
            _log.error("txn_verification_login_failed", node=s.node, error=str(e))
            return None, "NETWORK_EXCEPTION"
        except (OSError, ValueError) as e:
            _log.info("txn_verification_unreachable", node=s.node, error=str(e))
            return None, "NETWORK_EXCEPTION"
        finally:
            if sock is not None:
                sock.close()
        top = error_name(response.error_code)
        if top != NONE:
            # Kafka: a refused CLUSTER_ACTION is not the client's to see as such.
            _log.error("txn_verification_refused", node=s.node, error=top)
            return None, "INVALID_TXN_STATE" if top == "CLUSTER_AUTHORIZATION_FAILED" else top
        return {
            r.transactional_id: {
                (t.name, p.partition_index): error_name(p.partition_error_code)
                for t in r.topic_results
                for p in t.results_by_partition
            }
            for r in response.results_by_transaction
        }, NONE

    def _log_in(
        self, sock: socket.socket, node: int, login: InterBrokerLogin, client_id: str
    ) -> None:
        log_in(sock, login, f"node {node}", client_id, REQUEST_ID + 1)


# --- what a produce path calls ------------------------------------------------------


@dataclass
class Verification:
    """A Produce's partitions after verification: the Produce errors of those refused,
    and the guards the others' appends carry."""

    errors: dict[TopicPartition, tuple[str, str | None]] = field(default_factory=dict)
    guards: dict[TopicPartition, VerificationGuard] = field(default_factory=dict)


class GuardSource(Protocol):
    """What start_verification needs of the replica manager."""

    def start_transaction_verification(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, sequence: int
    ) -> tuple[str, VerificationGuard | None]: ...


def start_verification(
    sender: VerificationSender | None,
    guards: GuardSource,
    transactional_id: str | None,
    items: Sequence[tuple[TopicPartition, bytes]],
    timeout_ms: int,
    done: Callable[[Verification], None],
    operation: TransactionSupportedOperation = DEFAULT_ERROR,
) -> Verification | None:
    """Verify a Produce's transactional batches before they are appended (Kafka's
    ReplicaManager.handleProduceAppend). Returns the outcome when it is known now —
    nothing to ask (no transactional id, verification off, every transaction already
    open here) or a refusal — else None, and `done` gets it later from another thread,
    within `timeout_ms`. `operation`: the Produce version's
    (produce_supported_operation)."""
    if sender is None or not transactional_id:
        return Verification()
    try:
        batches = transactional_batches(items)
    except MixedProducers as e:
        return Verification({tp: (INVALID_PRODUCER_ID_MAPPING, str(e)) for tp, _ in items})
    if batches is None:
        return Verification()
    out = Verification()
    for tp, sequence in batches.first_sequences.items():
        error, guard = guards.start_transaction_verification(
            tp, batches.producer_id, batches.producer_epoch, sequence
        )
        if error != NONE:
            out.errors[tp] = (error, f"{error} for {tp[0]}-{tp[1]}")
        elif guard is not None:
            out.guards[tp] = guard
    if not out.guards:
        return out

    def verified(unverified: dict[TopicPartition, str]) -> None:
        for tp, error in unverified.items():
            out.errors[tp] = produce_error(error)
            out.guards.pop(tp, None)
        done(out)

    sender.verify(
        transactional_id,
        batches.producer_id,
        batches.producer_epoch,
        list(out.guards),
        timeout_ms,
        verified,
        operation,
    )
    return None


# --- what the group coordinator calls (TxnOffsetCommit) ---------------------------

NO_SEQUENCE = -1  # Kafka's RecordBatch.NO_SEQUENCE: the coordinator's batch has none
OffsetsVerified = tuple[str, VerificationGuard | None]  # (error, guard of the append)


def start_offsets_verification(
    sender: VerificationSender | None,
    guards: GuardSource,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets_partition: TopicPartition,
    timeout_ms: int,
    done: Callable[[OffsetsVerified], None],
    operation: TransactionSupportedOperation = DEFAULT_ERROR,
) -> OffsetsVerified | None:
    """Verify that the group's `__consumer_offsets` partition is in the producer's
    ongoing transaction before a TxnOffsetCommit's batch is appended there (Kafka's
    GroupCoordinator.handleTxnCommitOffsets: maybeStartTransactionVerificationForPartition
    with NO_SEQUENCE). Returns (error, guard) when known now — verification off, the
    producer's transaction already open in the partition (no guard needed), this node
    not its leader — else None, and `done` gets it later from another thread. The
    error is TxnOffsetCommit's (txn_offset_commit_error), NONE when verified;
    `operation`: the TxnOffsetCommit version's (txn_offset_commit_supported_operation)."""
    if sender is None or not transactional_id:
        return NONE, None
    error, guard = guards.start_transaction_verification(
        offsets_partition, producer_id, producer_epoch, NO_SEQUENCE
    )
    if error != NONE:
        return txn_offset_commit_error(error), None
    if guard is None:
        return NONE, None

    def verified(unverified: dict[TopicPartition, str]) -> None:
        failed = unverified.get(offsets_partition)
        done((NONE, guard) if failed is None else (txn_offset_commit_error(failed), None))

    sender.verify(
        transactional_id, producer_id, producer_epoch, [offsets_partition], timeout_ms,
        verified, operation,
    )  # fmt: skip
    return None
