"""The Admin's transaction operations (Kafka's Admin: listTransactions,
describeTransactions, describeProducers, abortTransaction), over the Transactions
gRPC service (proto/transactions.proto): listing asks every node (each coordinates
some transactional ids), describing asks the id's coordinator, describing producers
and aborting ask the partition's leader."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from seglog.proto import errors_pb2
from seglog.proto import groups_pb2 as gpb
from seglog.proto import transactions_pb2 as tpb

from .admin_requests import AdminRequests, StaleLeadership
from .cluster import TopicPartition, call
from .errors import for_code

E = errors_pb2.ErrorCode
_MOVED = (
    E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
    E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE,
)  # fmt: skip


class TransactionListing(NamedTuple):
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit, ...


class TransactionDescription(NamedTuple):
    transactional_id: str
    coordinator_id: int
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1: no transaction open
    partitions: list[TopicPartition]


class ProducerState(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1: no open transaction


def _raise_moved(code: int, what: str) -> None:
    if code in _MOVED:
        raise StaleLeadership(for_code(code, what))


class TransactionAdmin(AdminRequests):
    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        """Every transactional id of every node, sorted; filtered by Kafka's state
        names and producer ids when given (an unknown state name is an error)."""
        request = tpb.ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(producer_ids)
        )

        def attempt(timeout_s: float) -> list[TransactionListing]:
            self._metadata.refresh([])
            found: dict[str, TransactionListing] = {}
            for node_id in sorted(self._metadata.brokers):
                address = self._metadata.address(node_id)
                if address is None:
                    continue
                r = call(self._metadata.connections.txn_stub(address).ListTransactions,
                         request, timeout_s)  # fmt: skip
                if r.unknown_state_filters:
                    raise ValueError(
                        "unknown transaction state(s) "
                        + ", ".join(r.unknown_state_filters)
                        + " (Kafka's: Empty, Ongoing, PrepareCommit, PrepareAbort, "
                        "CompleteCommit, CompleteAbort, Dead, PrepareEpochFence)"
                    )
                _raise_moved(r.error_code, f"ListTransactions on node {node_id}")
                if r.error_code:
                    raise for_code(r.error_code, f"ListTransactions on node {node_id}")
                for t in r.transaction_states:
                    found[t.transactional_id] = TransactionListing(
                        t.transactional_id, node_id, t.producer_id, t.transaction_state
                    )
            return [found[k] for k in sorted(found)]

        return self._retrying(attempt)

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        """Each id's transaction, as its coordinator has it; an id the cluster does not
        know raises TransactionalIdNotFoundError naming it."""
        out = []
        for tid in transactional_ids:

            def attempt(timeout_s: float, tid: str = tid) -> TransactionDescription:
                where = self._find_txn_coordinator(tid, timeout_s)
                r = call(self._metadata.connections.txn_stub(where).DescribeTransactions,
                         tpb.DescribeTransactionsRequest(transactional_ids=[tid]),
                         timeout_s)  # fmt: skip
                s = r.transaction_states[0]
                _raise_moved(s.error_code, f"transactional id {tid!r}")
                if s.error_code:
                    raise for_code(s.error_code, f"transactional id {tid!r}")
                return TransactionDescription(
                    tid, s.coordinator_id, s.producer_id, s.producer_epoch,
                    s.transaction_state, s.transaction_timeout_ms,
                    s.transaction_start_time_ms,
                    [TopicPartition(t.name, p) for t in s.topics for p in t.partitions],
                )  # fmt: skip

            out.append(self._retrying(attempt))
        return out

    def _find_txn_coordinator(self, tid: str, timeout_s: float) -> tuple[str, int]:
        if self._metadata.stale():
            self._metadata.refresh([])
        known = self._metadata.broker_addresses()
        stub = self._metadata.connections.group_stub(
            random.choice(known) if known else self._metadata.bootstrap[0]
        )
        r = call(stub.FindCoordinator, gpb.FindCoordinatorRequest(key=tid, key_type=1), timeout_s)
        _raise_moved(r.error_code, f"transactional id {tid!r}")
        if r.error_code:
            raise for_code(r.error_code, f"transactional id {tid!r}: {r.error_message}")
        return r.host, r.port

    def _leader_address(self, tp: TopicPartition) -> tuple[str, int]:
        self._metadata.refresh([tp.topic])
        error = self._metadata.topic_error(tp.topic)
        if error is not None and not error.retriable:
            raise error
        info = self._metadata.partition(tp)
        if info is None:
            missing = f"{tp.topic}-{tp.partition} does not exist"
            raise for_code(E.UNKNOWN_TOPIC_OR_PARTITION, missing)
        address = self._metadata.address(info.leader)
        if address is None:
            raise StaleLeadership(for_code(E.LEADER_NOT_AVAILABLE, f"{tp.topic}-{tp.partition}"))
        return address

    def describe_producers(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """Each partition's active producers, as its leader has them."""
        out = {}
        for tp in partitions:

            def attempt(timeout_s: float, tp: TopicPartition = tp) -> list[ProducerState]:
                request = tpb.DescribeProducersRequest(
                    topics=[tpb.TxnTopic(name=tp.topic, partitions=[tp.partition])]
                )
                r = call(self._metadata.connections.txn_stub(self._leader_address(tp))
                         .DescribeProducers, request, timeout_s)  # fmt: skip
                p = r.partitions[0]
                _raise_moved(p.error_code, p.error_message)
                if p.error_code:
                    raise for_code(p.error_code, p.error_message)
                return [
                    ProducerState(
                        a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                        a.coordinator_epoch, a.current_txn_start_offset,
                    )
                    for a in p.active_producers
                ]  # fmt: skip

            out[tp] = self._retrying(attempt)
        return out

    def abort_transaction(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an ABORT marker for the producer's open transaction on `tp` at its
        leader (Kafka's Admin.abortTransaction: for a hanging transaction that no
        coordinator will end)."""
        request = tpb.WriteTxnMarkersRequest(
            markers=[
                tpb.WritableTxnMarker(
                    producer_id=producer_id, producer_epoch=producer_epoch,
                    transaction_result=False, coordinator_epoch=coordinator_epoch,
                    topics=[tpb.TxnTopic(name=tp.topic, partitions=[tp.partition])],
                )
            ]
        )  # fmt: skip

        def attempt(timeout_s: float) -> None:
            r = call(self._metadata.connections.txn_stub(self._leader_address(tp))
                     .WriteTxnMarkers, request, timeout_s)  # fmt: skip
            result = r.results[0]
            _raise_moved(result.error_code, result.error_message)
            if result.error_code:
                raise for_code(
                    result.error_code,
                    f"aborting producer {producer_id} (epoch {producer_epoch}) on "
                    f"{tp.topic}-{tp.partition}: {result.error_message}",
                )

        self._retrying(attempt)
