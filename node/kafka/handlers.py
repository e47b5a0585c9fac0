"""The Kafka request handlers: each decoded request goes to the node's replica manager
or controller calls, as the gRPC service's do, and its answer is encoded back.

Produce hands the client's RecordBatch bytes to the replica manager as they arrived
(the log assigns only baseOffset and partitionLeaderEpoch, outside the CRC); Fetch
reads FileSlices of the segments and the codec frames them for sendfile."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from seglog.controller.cluster_control import ControlError
from seglog.storage.disk_and_clock import plain_monotonic_s, plain_perf_s
from seglog.storage.file_slice import FileSlice
from seglog.storage.partition_metadata import uuid_to_topic_id
from seglog.storage.txn_verification import VerificationGuard

from ..client_quota_manager import NANOS_TO_PERCENTAGE, ClientQuotas
from ..event_log import EventLogger
from ..fetch_wakeups import FetchWaiter
from ..groups.offsets_records import OFFSETS_TOPIC
from ..partition_requests import FetchResult, OffsetResult
from ..produce_purgatory import StartedProduce
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizing_node import AuthorizingNode
from ..security.kafka_gate import allowed, allowed_on_any, authorized_operations
from ..security.node_authorizer import NodeAuthorizer
from ..transactions.txn_records import TRANSACTION_STATE_TOPIC
from ..transactions.txn_verification import produce_error, produce_supported_operation
from ..transactions.verification_sender import Verification, start_verification
from . import (
    admin,
    client_quotas,
    hot_codec,
    log_dirs,
    quorum,
    read_committed,
    records,
    replica_fetch,
    telemetry,
    topic_partitions,
    txn_apis,
    txn_markers,
)
from .codec import (
    KafkaRequest,
    Part,
    encode_response,
    encode_with_slices,
    placeholder,
    response_class,
)
from .deferred import FAILED, Deferred, Done, Handler, OnLoop
from .errors import error_code
from .fetch_requests import fetch_spec, split_unknown
from .groups import KafkaGroupApis
from .leader_hints import FETCH_HINTED, PRODUCE_HINTED, LeaderHints
from .metadata import api_versions, describe_cluster, metadata
from .node_api import KafkaNode

_log = EventLogger("kafka")
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
# ListOffsets' special timestamps (Kafka's ListOffsetsRequest).
EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = -2, -4, -5
MAX_FETCH_WAIT_MS = 30_000  # a client's fetch.max.wait.ms is capped at this
DEFAULT_PRODUCE_TIMEOUT_MS = 30_000


class KafkaApis:
    """Request → response parts (None: no response, for acks=0)."""

    def __init__(
        self,
        node: KafkaNode,
        listener: str = "PLAINTEXT",
        stopped: threading.Event | None = None,
    ) -> None:
        self.node = node
        self.listener = listener
        self.stopped = stopped or threading.Event()
        self._ids_image: Any = None
        self._names_by_uuid: dict[uuid.UUID, str] = {}
        # ACLs (None: off): the listener sets the node's authorizer; `guarded` is the
        # node with each topic operation authorized for the request's connection.
        self.authorizer: NodeAuthorizer | None = None
        guarded = AuthorizingNode(node, lambda: self.authorizer)
        groups = KafkaGroupApis(node, listener, lambda: self.authorizer)
        self.client_telemetry = telemetry.ClientTelemetry()
        self.quorum_voters: dict[int, tuple[str, int]] = {}  # the listener sets them
        # Client quotas (node/client_quota_manager.py): the node's, fed by its metadata.
        self.quotas: ClientQuotas = getattr(node, "client_quotas", None) or ClientQuotas()
        self._apis: dict[int, Handler] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: lambda r: metadata(
                guarded,
                self.listener,
                r,
                guarded.may_describe,
                lambda: authorized_operations(self.authorizer, CLUSTER, CLUSTER_NAME),
                lambda name: authorized_operations(self.authorizer, TOPIC, name),
            ),
            8: groups.offset_commit,
            9: groups.offset_fetch,
            10: groups.find_coordinator,
            11: groups.join_group,
            12: groups.heartbeat,
            13: groups.leave_group,
            14: groups.sync_group,
            15: groups.describe_groups,
            16: groups.list_groups,
            18: api_versions,
            # controller_mutation_rate: strict from CreateTopics v6, DeleteTopics v5 and
            # CreatePartitions v3, as Kafka.
            19: lambda r: admin.create_topics(guarded, r, self._mutations(r, 6)),
            20: lambda r: admin.delete_topics(guarded, r, self._mutations(r, 5)),
            21: lambda r: records.delete_records(self.node, r, lambda: self.authorizer),
            22: self.init_producer_id,
            23: self.offsets_for_leader_epoch,
            24: lambda r: txn_apis.add_partitions_to_txn(self, r),
            25: lambda r: txn_apis.add_offsets_to_txn(self, r),
            26: lambda r: txn_apis.end_txn(self, r),
            27: lambda r: txn_markers.write_txn_markers(self, r),
            28: lambda r: txn_apis.txn_offset_commit(self, r),
            61: lambda r: txn_apis.describe_producers(self, r),
            65: lambda r: txn_apis.describe_transactions(self, r),
            66: lambda r: txn_apis.list_transactions(self, r),
            32: lambda r: admin.describe_configs(
                guarded,
                r,
                lambda: allowed(
                    self.authorizer, AclOperation.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME
                ),
                self._may_group_config,
            ),
            33: lambda r: admin.alter_configs(guarded, r, self._may_group_config),
            34: lambda r: log_dirs.alter_replica_log_dirs(self.node, r, self.authorizer),
            35: lambda r: log_dirs.describe_log_dirs(self.node, r, self.authorizer),
            37: lambda r: admin.create_partitions(guarded, r, self._mutations(r, 3)),
            42: groups.delete_groups,
            43: lambda r: admin.elect_leaders(
                self.node,
                r,
                lambda: allowed(self.authorizer, AclOperation.ALTER, CLUSTER, CLUSTER_NAME),
            ),
            47: groups.offset_delete,
            48: lambda r: client_quotas.describe_client_quotas(
                self.node,
                r,
                lambda: allowed(
                    self.authorizer, AclOperation.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME
                ),
            ),
            49: lambda r: client_quotas.alter_client_quotas(
                self.node,
                r,
                lambda: allowed(self.authorizer, AclOperation.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME),
            ),
            44: lambda r: admin.incremental_alter_configs(guarded, r, self._may_group_config),
            45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments,
            55: lambda r: quorum.describe_quorum(
                self.node,
                r,
                self.quorum_voters,
                allowed(self.authorizer, AclOperation.DESCRIBE, CLUSTER, CLUSTER_NAME),
            ),
            60: lambda r: describe_cluster(
                self.node,
                self.listener,
                r,
                lambda: authorized_operations(self.authorizer, CLUSTER, CLUSTER_NAME),
            ),
            75: lambda r: topic_partitions.describe_topic_partitions(
                guarded,
                self.listener,
                r,
                guarded.may_describe,
                lambda name: authorized_operations(self.authorizer, TOPIC, name),
            ),
            71: lambda r: telemetry.get_telemetry_subscriptions(
                self.client_telemetry, r, int(plain_monotonic_s() * 1000)
            ),
            68: groups.consumer_group_heartbeat,
            69: groups.consumer_group_describe,
        }

    def __call__(self, request: KafkaRequest) -> list[Part] | Deferred | None:
        if not self.quotas.request.enabled:
            return self._apis[request.api_key](request)
        # request_percentage: the handler's time on its thread, as Kafka's request quota.
        started = plain_perf_s()
        try:
            return self._apis[request.api_key](request)
        finally:
            spent = (plain_perf_s() - started) * 1e9 * NANOS_TO_PERCENTAGE
            client_quotas.record(self.quotas.request, request, spent)

    def _may_group_config(self, alter: bool, group: str) -> bool:
        op = AclOperation.ALTER_CONFIGS if alter else AclOperation.DESCRIBE_CONFIGS
        return allowed(self.authorizer, op, ResourceType.GROUP, group)

    def _mutations(self, request: KafkaRequest, strict_since: int) -> Any:
        return client_quotas.MutationQuota.of(
            self.quotas.controller_mutation, request, strict_since
        )

    def alter_partition_reassignments(self, request: KafkaRequest) -> list[Part]:
        if not allowed(self.authorizer, AclOperation.ALTER, CLUSTER, CLUSTER_NAME):
            return admin.refuse_reassignments(request, "CLUSTER_AUTHORIZATION_FAILED")
        return admin.alter_partition_reassignments(self.node, request)

    def list_partition_reassignments(self, request: KafkaRequest) -> list[Part]:
        if not allowed(self.authorizer, AclOperation.DESCRIBE, CLUSTER, CLUSTER_NAME):
            return admin.refuse_reassignments(request, "CLUSTER_AUTHORIZATION_FAILED")
        return admin.list_partition_reassignments(self.node, request)

    # --- produce -------------------------------------------------------------------

    def produce(self, request: KafkaRequest) -> list[Part] | Deferred | None:
        """Appends now; the answer (acks=-1: once the high watermark passed) comes from
        a Deferred, so the connection's next request can be appended meanwhile."""
        req = request.body
        acks = req.acks
        refuse: str | None = None
        if acks not in (-1, 0, 1):
            refuse = "INVALID_REQUIRED_ACKS"
        elif req.transactional_id is not None and not allowed(
            self.authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
        ):
            refuse = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"  # Kafka's rule for a transactional id
        items: list[tuple[tuple[str, int], bytes]] = []
        seen: set[tuple[str, int]] = set()
        errors: dict[tuple[str, int], str] = {}
        for t in req.topic_data:
            for p in t.partition_data:
                tp = (t.name, p.index)
                if refuse is not None:
                    errors[tp] = refuse
                elif not allowed(self.authorizer, AclOperation.WRITE, TOPIC, t.name):
                    errors[tp] = "TOPIC_AUTHORIZATION_FAILED"
                elif t.name in INTERNAL_TOPICS:
                    # Kafka: only the coordinators write their internal topics.
                    errors[tp] = "INVALID_TOPIC_EXCEPTION"
                elif p.records is None or len(p.records) == 0:
                    errors[tp] = "CORRUPT_MESSAGE"
                elif tp in seen:
                    errors[tp] = "INVALID_REQUEST"
                else:
                    seen.add(tp)
                    items.append((tp, bytes(p.records)))
        client_quotas.record(self.quotas.produce, request, request.size)  # producer_byte_rate
        timeout = req.timeout_ms if req.timeout_ms > 0 else DEFAULT_PRODUCE_TIMEOUT_MS
        rm = self.node.replica_manager
        guards: dict[tuple[str, int], VerificationGuard] = {}
        messages: dict[tuple[str, int], str | None] = {}
        sender = self.node.txn_verification
        if items and refuse is None and req.transactional_id and sender is not None:
            # KIP-890: a batch that opens a transaction here is verified first.
            box: Future[Verification] = Future()
            now = start_verification(
                sender, rm, req.transactional_id, items, timeout, box.set_result,
                produce_supported_operation(request.api_version),
            )  # fmt: skip
            if now is None:
                return self._produce_verified(request, items, errors, timeout, box)
            items = _verified(now, items, errors, messages)
            guards = now.guards
        started = (
            rm.start_produce_all(items, acks, timeout, verification_guards=guards)
            if items
            else None
        )

        def answer() -> list[Part] | None:
            results = rm.await_produced(started) if started is not None else []
            done = dict(zip((tp for tp, _ in items), results, strict=True))
            # Counted and logged whether or not an answer goes back (acks=0: none).
            self._report_produce_errors(errors, done)
            if acks == 0:
                return None
            return self._produce_response(request, errors, done, messages)

        if started is None:
            return answer()

        def begin(done: Done) -> None:
            assert started is not None
            on_loop: OnLoop[None] = OnLoop(
                done, lambda _: answer(), started.deadline - plain_monotonic_s()
            )
            rm.when_produced(started, on_loop.finish_threadsafe)

        return Deferred(answer, begin)

    def _produce_verified(
        self,
        request: KafkaRequest,
        items: list[tuple[tuple[str, int], bytes]],
        errors: dict[tuple[str, int], str],
        timeout: int,
        verification: Future[Verification],
    ) -> Deferred:
        """A Produce waiting for its verification (node/transactions/
        verification_sender.py), which the loop does not wait for: the append, as any
        Produce's, once the answer came, the verified partitions with their guards. The
        connection reads its next request once this one is answered (`in_order`), so
        no later batch of the producer passes this one; it reads on once the append is
        done (`started`), as the next batch then lands behind it."""
        acks = request.body.acks
        rm = self.node.replica_manager
        began = plain_monotonic_s()
        messages: dict[tuple[str, int], str | None] = {}

        def append(v: Verification) -> tuple[StartedProduce | None, list[Any]]:
            todo = _verified(v, items, errors, messages)
            left = max(1, timeout - int((plain_monotonic_s() - began) * 1000))
            started = (
                rm.start_produce_all(todo, acks, left, verification_guards=v.guards)
                if todo
                else None
            )
            return started, todo

        def answer(started: StartedProduce | None, todo: list[Any]) -> list[Part] | None:
            results = rm.await_produced(started) if started is not None else []
            done = dict(zip((tp for tp, _ in todo), results, strict=True))
            self._report_produce_errors(errors, done)
            if acks == 0:
                return None
            return self._produce_response(request, errors, done, messages)

        def wait() -> list[Part] | None:
            try:  # the sender answers by the deadline; the margin is for a stall
                v = verification.result(timeout=timeout / 1000 + 5)
            except FutureTimeout:
                v = Verification({tp: produce_error("NETWORK_EXCEPTION") for tp, _ in items})
            return answer(*append(v))

        def begin(done: Done) -> None:
            loop = asyncio.get_running_loop()

            def verified(v: Verification) -> None:  # on the loop
                try:
                    started, todo = append(v)
                    if started is None:
                        done(answer(None, todo))
                        return
                    on_loop: OnLoop[None] = OnLoop(
                        done,
                        lambda _: answer(started, todo),
                        started.deadline - plain_monotonic_s(),
                    )
                    rm.when_produced(started, on_loop.finish_threadsafe)
                except Exception as e:  # noqa: BLE001 - a bug: this connection only
                    _log.error("kafka_handler_failed", api="Produce", error=f"{e!r}")
                    done(FAILED)
                deferred.started()  # appended (or answered): the next request may come

            def from_any_thread(f: Future[Verification]) -> None:
                if not loop.is_closed():
                    with contextlib.suppress(RuntimeError):  # closing meanwhile
                        loop.call_soon_threadsafe(verified, f.result())

            verification.add_done_callback(from_any_thread)

        deferred = Deferred(wait, begin, in_order=True)
        return deferred

    def _report_produce_errors(
        self, errors: dict[tuple[str, int], str], done: dict[Any, Any]
    ) -> None:
        report = self.node.replica_manager.produce_errors.report
        for (topic, index), name in errors.items():
            report(self.listener, topic, index, name, name)
        for (topic, index), r in done.items():
            if r.error_name != "NONE":
                report(self.listener, topic, index, r.error_name, r.error_message)

    def _produce_response(
        self,
        request: KafkaRequest,
        errors: dict[tuple[str, int], str],
        done: dict[Any, Any],
        messages: dict[tuple[str, int], str | None] | None = None,
    ) -> list[Part]:
        """The answer; from v10 a partition answered NOT_LEADER_OR_FOLLOWER names its
        current leader, and the answer those leaders' endpoints (KIP-951)."""
        hints = (
            LeaderHints(self.node, self.listener, PRODUCE_HINTED)
            if request.api_version >= hot_codec.PRODUCE_LEADER_HINTS
            else None
        )
        topics = []
        for t in request.body.topic_data:
            partitions: list[hot_codec.Produced] = []
            for p in t.partition_data:
                tp = (t.name, p.index)
                r = done.get(tp)
                name = r.error_name if r is not None else errors.get(tp, "UNKNOWN_SERVER_ERROR")
                leader = hints.current_leader(tp, name) if hints is not None else None
                if r is None:
                    message = (messages or {}).get(tp, name)
                    partitions.append((p.index, error_code(name), -1, -1, -1, message, (), leader))
                    continue
                partitions.append(
                    (
                        p.index,
                        error_code(name),
                        r.base_offset,
                        r.log_append_time,
                        r.log_start_offset,
                        r.error_message or None,
                        r.record_errors,
                        leader,
                    )
                )
            topics.append((t.name, partitions))
        return [
            hot_codec.encode_produce_response(
                request.correlation_id,
                request.api_version,
                topics,
                request.throttle_ms,
                hints.endpoints() if hints is not None else (),
            )
        ]

    # --- fetch ---------------------------------------------------------------------

    def fetch(self, request: KafkaRequest) -> list[Part] | Deferred:
        """A fetch with enough bytes (or an error) now is answered now; one that must
        wait for fetch.min.bytes goes to a delayed thread for up to fetch.max.wait.ms."""
        req = request.body
        if replica_fetch.replica_of(request)[0] >= 0:
            return replica_fetch.fetch(self, request)
        topics, ids = self.fetch_topics(request)
        committed = req.isolation_level == read_committed.READ_COMMITTED
        topics, denied = split_unknown(topics, ids)
        denied += [
            FetchResult(name, p.partition, "TOPIC_AUTHORIZATION_FAILED")
            for name, t in topics
            if not allowed(self.authorizer, AclOperation.READ, TOPIC, name)
            for p in t.partitions
        ]
        specs = [
            fetch_spec(name, p, request.api_version, replica=False, read_committed=committed)
            for name, t in topics
            if not denied or allowed(self.authorizer, AclOperation.READ, TOPIC, name)
            for p in t.partitions
        ]
        max_bytes = self.node.fetch_max_bytes
        if req.max_bytes > 0:
            max_bytes = min(req.max_bytes, max_bytes)
        quota = client_quotas.FetchQuota.of(self.quotas.fetch, request)  # consumer_byte_rate
        if quota is not None:
            max_bytes = quota.max_bytes(max_bytes)
        wait_ms = min(max(req.max_wait_ms, 0), MAX_FETCH_WAIT_MS)
        if req.min_bytes <= 0:
            wait_ms = 0
        min_bytes = max(req.min_bytes, 1)

        def read(wait: int) -> list[Any]:
            return denied + self.node.replica_manager.fetch(
                specs,
                replica_id=-1,  # a consumer's (a replica's went to replica_fetch)
                max_wait_ms=wait,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                cancelled=self.stopped.is_set,
                zero_copy=True,
            )

        def enough(results: list[Any]) -> bool:
            return (
                any(r.error_name != "NONE" for r in results)
                or sum(len(r.records) for r in results) >= min_bytes
                or self.stopped.is_set()
            )

        def respond(results: list[Any]) -> list[Part]:
            if quota is not None and quota.throttled(results):
                close_slices(results)
                return self.fetch_response(request, [], ids)  # Kafka: empty when throttled
            return self.fetch_response(request, results, ids)

        now = read(0)
        if wait_ms == 0 or enough(now):
            return respond(now)
        close_slices(now)
        rm = self.node.replica_manager

        def begin(done: Done) -> None:
            # Parked on the loop: each change to the partitions schedules one look.
            def answer(results: list[Any] | None) -> list[Part]:
                rm.wakeups.forget(waiter)
                return respond(read(0) if results is None else results)

            on_loop: OnLoop[list[Any]] = OnLoop(done, answer, wait_ms / 1000)

            def look() -> None:
                if on_loop.finished:
                    return
                waiter.arm()
                results = read(0)
                if enough(results):
                    on_loop.finish(results)
                else:
                    close_slices(results)

            waiter = FetchWaiter(on_wake=lambda: on_loop.soon(look))
            rm.wakeups.watch(waiter, {(spec.topic, spec.partition) for spec in specs})
            on_loop.loop.call_soon(look)  # a change between the first read and the parking

        return Deferred(lambda: respond(read(wait_ms)), begin)

    def fetch_topics(self, request: KafkaRequest) -> tuple[list[tuple[str, Any]], Any]:
        """The request's topics by name; from v13 they come by id (KIP-516), and the
        second value maps each known name back to its id (None before v13). An unknown
        id stands for itself (its text) and is not in the map."""
        topics = request.body.topics
        if request.api_version < 13:
            return [(t.topic, t) for t in topics], None
        image = self.node.metadata_image()
        if image is not self._ids_image:  # names by UUID, remembered per metadata image
            self._ids_image, self._names_by_uuid = image, {}
        known = self._names_by_uuid
        named: list[tuple[str, Any]] = []
        ids: dict[str, Any] = {}
        for t in topics:
            name = known.get(t.topic_id)
            if name is None:
                name = image.topic_names_by_id.get(uuid_to_topic_id(t.topic_id))
                if name is None:
                    named.append((str(t.topic_id), t))
                    continue
                known[t.topic_id] = name  # bounded by the image's topics
            named.append((name, t))
            ids[name] = t.topic_id
        return named, ids

    def fetch_response(
        self,
        request: KafkaRequest,
        results: list[Any],
        ids: Any = None,
        session_id: int = 0,
        error: str = "NONE",
    ) -> list[Part]:
        if request.api_version >= hot_codec.FETCH_FLEXIBLE[0]:
            return self._flexible_fetch_response(request, results, ids, session_id, error)
        req = request.body
        cls = response_class(request)
        slices: dict[bytes, FileSlice] = {}
        try:
            topics: list[Any] = []
            for r in results:
                records: bytes | None = b""
                if isinstance(r.records, FileSlice):
                    if len(r.records) > 0:
                        token = placeholder()
                        slices[token] = r.records
                        records = token
                    else:
                        r.records.close()
                elif r.records:
                    records = bytes(r.records)
                data_cls = cls.FetchableTopicResponse.PartitionData
                part = data_cls(
                    partition_index=r.partition,
                    error_code=error_code(r.error_name),
                    high_watermark=r.high_watermark,
                    last_stable_offset=read_committed.last_stable_offset(r),
                    log_start_offset=r.log_start_offset,
                    aborted_transactions=read_committed.aborted_transactions(
                        data_cls, r, req.isolation_level
                    ),
                    preferred_read_replica=-1,
                    records=records,
                )
                if r.diverging_epoch is not None and request.api_version >= 12:
                    part.diverging_epoch = part.EpochEndOffset(*r.diverging_epoch)
                if topics and topics[-1].topic == r.topic:
                    topics[-1].partitions.append(part)
                else:
                    t = cls.FetchableTopicResponse(topic=r.topic, partitions=[part])
                    if ids is not None:  # v13+: by id (an unknown one is its own text)
                        t.topic_id = ids.get(r.topic) or uuid.UUID(r.topic)
                    topics.append(t)
            body = cls(
                throttle_time_ms=request.throttle_ms,
                error_code=error_code(error),
                session_id=session_id,
                responses=topics,
            )
            return encode_with_slices(request, body, slices)
        except BaseException:
            for piece in slices.values():
                piece.close()
            raise

    def _flexible_fetch_response(
        self,
        request: KafkaRequest,
        results: list[Any],
        ids: Any,
        session_id: int,
        error: str,
    ) -> list[Part]:
        """fetch_response at v12+ (node/kafka/hot_codec.py): records as they are, a
        FileSlice a part of its own; from v16 a partition answered NOT_LEADER_OR_FOLLOWER
        or FENCED_LEADER_EPOCH names its current leader, and the answer those leaders'
        endpoints (KIP-951)."""
        version = request.api_version
        isolation = request.body.isolation_level
        hints = (
            LeaderHints(self.node, self.listener, FETCH_HINTED)
            if version >= hot_codec.FETCH_NODE_ENDPOINTS
            else None
        )
        topics: list[hot_codec.FetchTopic] = []
        try:
            for r in results:
                records = r.records
                if isinstance(records, FileSlice) and len(records) == 0:
                    records.close()
                    records = b""
                part = hot_codec.FetchAnswer(
                    r.partition,
                    error_code(r.error_name),
                    r.high_watermark,
                    read_committed.last_stable_offset(r),
                    r.log_start_offset,
                    records if records is not None else b"",
                    aborted_transactions=read_committed.aborted_pairs(r, isolation),
                    diverging_epoch=r.diverging_epoch,
                    current_leader=None
                    if hints is None
                    else hints.current_leader((r.topic, r.partition), r.error_name, r.leader),
                )
                if topics and topics[-1].topic == r.topic:
                    topics[-1].partitions.append(part)
                    continue
                topic_id = None
                if ids is not None:  # v13+: by id (an unknown one is its own text)
                    topic_id = ids.get(r.topic) or uuid.UUID(r.topic)
                topics.append(hot_codec.FetchTopic(r.topic, topic_id, [part]))
            body = hot_codec.FetchResponseBody(
                request.throttle_ms,
                error_code(error),
                session_id,
                topics,
                hints.endpoints() if hints is not None else (),
            )
            return hot_codec.encode_fetch_response(request.correlation_id, version, body)
        except BaseException:
            close_slices(results)
            raise

    # --- offsets -------------------------------------------------------------------

    def list_offsets(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        rm = self.node.replica_manager
        replica = max(req.replica_id, -1)  # a follower's (its log end, not the HW)
        # v2+: a READ_COMMITTED client's LATEST is the last stable offset.
        committed = getattr(req, "isolation_level", 0) == read_committed.READ_COMMITTED
        topics = []
        for t in req.topics:
            partitions = []
            for p in t.partitions:
                epoch = p.current_leader_epoch if request.api_version >= 4 else -1
                # Without tiered storage (KIP-405) the earliest local offset is the log
                # start (v8's -4), and nothing is tiered (v9's -5: offset -1), as Kafka.
                timestamp = p.timestamp
                if timestamp in (EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
                    timestamp = EARLIEST_TIMESTAMP
                r = (
                    rm.list_offset(
                        (t.name, p.partition_index), timestamp, epoch, replica, committed
                    )
                    if allowed(self.authorizer, AclOperation.DESCRIBE, TOPIC, t.name)
                    else OffsetResult(error_name="TOPIC_AUTHORIZATION_FAILED")
                )
                if p.timestamp == LATEST_TIERED_TIMESTAMP and r.error_name == "NONE":
                    r = OffsetResult(offset=-1, timestamp=-1, leader_epoch=-1)
                partitions.append(
                    cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=error_code(r.error_name),
                        timestamp=r.timestamp,
                        offset=r.offset,
                        leader_epoch=r.leader_epoch,
                    )
                )
            topics.append(cls.ListOffsetsTopicResponse(name=t.name, partitions=partitions))
        return encode_response(request, cls(throttle_time_ms=0, topics=topics))

    def offsets_for_leader_epoch(self, request: KafkaRequest) -> list[Part]:
        req = request.body
        cls = response_class(request)
        rm = self.node.replica_manager
        topics = []
        for t in req.topics:
            partitions = []
            for p in t.partitions:
                r = (
                    rm.end_offset_for_epoch(
                        (t.topic, p.partition), p.leader_epoch, p.current_leader_epoch
                    )
                    if allowed(self.authorizer, AclOperation.DESCRIBE, TOPIC, t.topic)
                    else OffsetResult(error_name="TOPIC_AUTHORIZATION_FAILED")
                )
                partitions.append(
                    cls.OffsetForLeaderTopicResult.EpochEndOffset(
                        error_code=error_code(r.error_name),
                        partition=p.partition,
                        leader_epoch=r.leader_epoch,
                        end_offset=r.offset,
                    )
                )
            topics.append(cls.OffsetForLeaderTopicResult(topic=t.topic, partitions=partitions))
        return encode_response(request, cls(throttle_time_ms=0, topics=topics))

    # --- producer ids --------------------------------------------------------------

    def init_producer_id(self, request: KafkaRequest) -> list[Part] | Deferred:
        req = request.body
        cls = response_class(request)
        if req.transactional_id is not None:
            return txn_apis.init_producer_id(self, request)
        if not allowed(
            self.authorizer, AclOperation.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME
        ) and not allowed_on_any(self.authorizer, AclOperation.WRITE, TOPIC):
            body = cls(
                throttle_time_ms=0,
                error_code=error_code("CLUSTER_AUTHORIZATION_FAILED"),
                producer_id=-1,
                producer_epoch=-1,
            )
            return encode_response(request, body)
        try:
            pid = self.node.next_producer_id()
        except ControlError as e:
            _log.info("kafka_init_producer_id_failed", error=e.error_name)
            # Retriable for every client: it asks again.
            body = cls(
                throttle_time_ms=0,
                error_code=error_code("COORDINATOR_NOT_AVAILABLE"),
                producer_id=-1,
                producer_epoch=-1,
            )
            return encode_response(request, body)
        return encode_response(
            request, cls(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
        )


def _verified(
    v: Verification,
    items: list[tuple[tuple[str, int], bytes]],
    errors: dict[tuple[str, int], str],
    messages: dict[tuple[str, int], str | None],
) -> list[tuple[tuple[str, int], bytes]]:
    """The items left to append after verification; the refused ones' errors noted."""
    for tp, (name, message) in v.errors.items():
        errors[tp], messages[tp] = name, message
    return [(tp, data) for tp, data in items if tp not in v.errors]


def close_slices(results: list[Any]) -> None:
    """Release the FileSlices of a read that is not answered."""
    for r in results:
        if isinstance(r.records, FileSlice):
            r.records.close()
