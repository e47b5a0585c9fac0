"""A follower's fetcher over Kafka's inter-broker protocol (replica.fetch.protocol=kafka),
as Kafka's ReplicaFetcherThread does it but on the node's event loop: one connection
to the leader's inter-broker Kafka listener (inter.broker.listener.name), Fetch v15
(ReplicaState with this node's broker epoch, topics by id) in a KIP-227 session,
OffsetForLeaderEpoch v4 and ListOffsets v7 with this node's replica id. Each answer is
appended on the loop (a page-cache write) and the next fetch goes at once.

The rounds — which partitions are due, the session, what an answer does to each
replica — are the gRPC fetcher's (node/replica_fetcher.py, FetcherRounds): only the
wire differs. A connection that fails or an answer that does not come in
ANSWER_TIMEOUT_S fails every outstanding partition into its backoff and is opened
again after RECONNECT_S."""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
import uuid
from typing import Any

from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from seglog.replication import partition_replica as pr
from seglog.storage.partition_metadata import topic_id_to_uuid

from ..event_log import EventLogger
from ..event_loop import NodeLoop
from ..hosted_partition import HostedPartition, TopicPartition
from ..replica_fetcher import (
    FETCH_MAX_BYTES,
    FETCH_WAIT_MS,
    CarryOut,
    FetcherRounds,
    FollowerHost,
)
from ..security.inter_broker_sasl import InterBrokerLogin, InterBrokerLoginError
from . import hot_codec
from .errors import error_name
from .sasl_exchange import sasl_exchange

_log = EventLogger("replica_fetcher")
_SIZE = struct.Struct(">i")
FETCH_VERSION = 15
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = FETCH_WAIT_MS / 1000 + 10
RECONNECT_S = 0.2
LOGIN_RETRY_S = 1.0  # after a refused SASL login
IDLE_WAIT_S = 0.05  # between rounds with nothing to send (backoffs are re-asked)
STREAM_LIMIT = 64 << 20  # the largest answer frame read (FETCH_MAX_BYTES and then some)
SESSION_ERRORS = ("FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH")


class ReplicaFetchError(Exception):
    """The leader answered the request as a whole with an error, or broke the protocol."""


class KafkaReplicaFetcher(FetcherRounds):
    def __init__(
        self,
        manager: FollowerHost,
        carry_out: CarryOut,
        leader: int,
        address: tuple[str, int],
        node_loop: NodeLoop,
        ssl_context: ssl.SSLContext | None = None,
        login: InterBrokerLogin | None = None,
    ) -> None:
        super().__init__(manager, carry_out, leader)
        self._address = address
        self._node_loop = node_loop
        self._ssl = ssl_context
        self._login = login
        self._stopped = False
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._correlation = itertools.count(1)
        self._names: dict[uuid.UUID, str] = {}  # topic ids of the partitions fetched
        self._ids: dict[str, uuid.UUID] = {}
        node_loop.call(self._start)

    # --- life (stop and _kick from any thread) ---------------------------------------------

    def _start(self) -> None:
        if self._stopped:
            return
        self._wakeup = asyncio.Event()
        self._task = self._node_loop.loop.create_task(self._run())

    def stop(self) -> None:
        self._stopped = True
        try:
            self._node_loop.call(self._cancel)
        except RuntimeError:
            # The node's loop closed first (its shutdown step runs before the replica
            # manager's): the fetch task went with it.
            if not self._node_loop.loop.is_closed():
                raise

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _kick(self) -> None:
        self._node_loop.call(self._wake)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    # --- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        host, port = self._address
        while not self._stopped:
            writer: asyncio.StreamWriter | None = None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=self._ssl, limit=STREAM_LIMIT),
                    CONNECT_TIMEOUT_S,
                )
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._login is not None:
                    await self._authenticate(self._login, reader, writer)
                # Bounded by stop(): each pass sends a round or waits a little.
                while not self._stopped:
                    if not await self._round(reader, writer):
                        assert self._wakeup is not None
                        try:
                            await asyncio.wait_for(self._wakeup.wait(), IDLE_WAIT_S)
                        except TimeoutError:
                            pass
            except asyncio.CancelledError:
                raise
            except InterBrokerLoginError as e:
                # Wrong credentials or mechanism: an operator must act, so say it loudly.
                _log.error("fetcher_login_failed", leader=self.leader, error=str(e))
                self._fail_outstanding()
                await asyncio.sleep(LOGIN_RETRY_S)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ReplicaFetchError) as e:
                # The leader is down, moved or refused: metadata will tell.
                _log.info("fetcher_disconnected", leader=self.leader, error=str(e))
                self._fail_outstanding()
                await asyncio.sleep(RECONNECT_S)
            except Exception:  # noqa: BLE001 - keep fetching; log and back off
                _log.error("fetcher_failed", exc=True, leader=self.leader)
                self._fail_outstanding()
                await asyncio.sleep(0.5)
            finally:
                if writer is not None:
                    writer.close()

    async def _round(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One round of requests; False when there was nothing to send."""
        fetches, others, forgotten = self._collect()
        assert self._wakeup is not None
        self._wakeup.clear()  # what becomes due from now on starts the next round at once
        for hp, req in others:
            try:
                await self._send_other(hp, req, reader, writer)
            except BaseException:
                self._failed_other(hp, req)
                raise
        if fetches or forgotten or self._outstanding:
            await self._send_fetch(fetches, forgotten, reader, writer)
            return True
        return bool(others)

    async def _exchange(
        self,
        request: Any,
        response_class: Any,
        version: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        flexible: bool = True,
    ) -> Any:
        """Send one request and read its answer (one request in flight at a time)."""
        correlation_id = self._next_correlation()
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        frame = bytes(request.encode(header=True, framed=True))
        body = await self._send(frame, correlation_id, reader, writer, flexible)
        return response_class.decode(body, version=version)

    async def _authenticate(
        self,
        login: InterBrokerLogin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Kafka's SASL exchange on a new connection, before any fetch
        (node/kafka/sasl_exchange.py). A refusal is logged as such and the connection is
        tried again after a pause; the partitions stay with the leader meanwhile, as
        Kafka's fetcher does."""
        exchange = sasl_exchange(login, f"node {self.leader}")
        step = next(exchange)
        # Bounded by the exchange's requests (two or three).
        while True:
            answer = await self._exchange(
                step.request, step.response_class, step.version, reader, writer, step.flexible
            )
            try:
                step = exchange.send(answer)
            except StopIteration:
                return

    def _next_correlation(self) -> int:
        return next(self._correlation) & 0x7FFFFFFF

    @property
    def _client_id(self) -> str:
        return f"broker-{self.manager.node_id}-fetcher"

    async def _send(
        self,
        frame: bytes,
        correlation_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        flexible: bool = True,
    ) -> memoryview:
        """Write a request frame and read its answer's body (after its header: v1 for a
        flexible answer, v0 for SaslHandshake's)."""
        writer.write(frame)
        await writer.drain()
        # One deadline for the whole answer (asyncio.timeout: no task per read, as
        # wait_for makes).
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            if size < 5 or size > STREAM_LIMIT:
                raise ReplicaFetchError(f"answer frame of {size} bytes from node {self.leader}")
            frame = await reader.readexactly(size)
        (got,) = _SIZE.unpack_from(frame)
        # Response header v1 ends with its tagged fields: none.
        if got != correlation_id or (flexible and frame[4] != 0):
            raise ReplicaFetchError(
                f"answer for correlation id {got} from node {self.leader}, "
                f"expected {correlation_id}"
            )
        return memoryview(frame)[5 if flexible else 4 :]

    # --- Fetch ---------------------------------------------------------------------------

    def _topic_id(self, hp: HostedPartition) -> uuid.UUID:
        topic = hp.tp[0]
        known = self._ids.get(topic)
        if known is None:
            known = self._ids[topic] = topic_id_to_uuid(hp.topic_id)
            self._names[known] = topic
        return known

    async def _send_fetch(
        self,
        fetches: list[tuple[HostedPartition, pr.FetchRequest]],
        forgotten: list[TopicPartition],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        full = self._session_id == 0
        # A new session starts with a full fetch of everything outstanding.
        sending = list(self._outstanding.values()) if full else fetches
        by_topic: dict[uuid.UUID, list[tuple[int, int, int, int, int, int]]] = {}
        for hp, req in sending:
            by_topic.setdefault(self._topic_id(hp), []).append(
                (
                    hp.tp[1],
                    req.current_leader_epoch,
                    req.fetch_offset,
                    req.last_fetched_epoch,
                    req.log_start_offset,
                    req.max_bytes,
                )
            )
        gone: dict[uuid.UUID, list[int]] = {}
        if not full:
            for topic, partition in forgotten:
                topic_id = self._ids.get(topic)
                if topic_id is not None:
                    gone.setdefault(topic_id, []).append(partition)
        correlation_id = self._next_correlation()
        frame = hot_codec.encode_fetch_request(
            correlation_id,
            self._client_id,
            FETCH_VERSION,
            replica_id=self.manager.node_id,
            replica_epoch=self.manager.broker_epoch,
            max_wait_ms=FETCH_WAIT_MS,
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=self._session_id,
            session_epoch=self._epoch,
            topics=list(by_topic.items()),
            forgotten=list(gone.items()),
        )
        answer_body = await self._send(frame, correlation_id, reader, writer)
        response = hot_codec.decode_fetch_response(answer_body, FETCH_VERSION)
        error = error_name(response.error_code)
        if error in SESSION_ERRORS:
            _log.info("fetch_session_reset", leader=self.leader, error=error)
            self._reset_session()  # the next round opens a new one with a full fetch
            return
        if error != "NONE":
            raise ReplicaFetchError(f"fetch from node {self.leader} failed: {error}")
        self._fetch_answered(
            response.session_id,
            full,
            sending,
            forgotten,
            (
                ((self._names.get(t.topic_id, str(t.topic_id)), p.partition_index), answer(p))
                for t in response.responses
                for p in t.partitions
            ),
        )

    # --- OffsetForLeaderEpoch, ListOffsets ---------------------------------------------------

    async def _send_other(
        self,
        hp: HostedPartition,
        req: pr.FollowerRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        topic, partition = hp.tp
        node_id = self.manager.node_id
        if isinstance(req, pr.OffsetsForLeaderEpochRequest):
            E = OffsetForLeaderEpochRequest
            v = OFFSET_FOR_LEADER_EPOCH_VERSION
            request = E[v](
                replica_id=node_id,
                topics=[
                    E.OffsetForLeaderTopic(
                        topic=topic,
                        partitions=[
                            E.OffsetForLeaderTopic.OffsetForLeaderPartition(
                                partition=partition,
                                current_leader_epoch=req.current_leader_epoch,
                                leader_epoch=req.leader_epoch,
                            )
                        ],
                    )
                ],
            )
            r = await self._exchange(request, OffsetForLeaderEpochResponse, v, reader, writer)
            p = r.topics[0].partitions[0]
            self._deliver_other(hp, req, error_name(p.error_code), p)
        elif isinstance(req, pr.ListOffsetsRequest):
            L = ListOffsetsRequest
            v = LIST_OFFSETS_VERSION
            request = L[v](
                replica_id=node_id,
                isolation_level=0,
                topics=[
                    L.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            L.ListOffsetsTopic.ListOffsetsPartition(
                                partition_index=partition,
                                current_leader_epoch=req.current_leader_epoch,
                                timestamp=req.timestamp,
                            )
                        ],
                    )
                ],
            )
            r = await self._exchange(request, ListOffsetsResponse, v, reader, writer)
            p = r.topics[0].partitions[0]
            self._deliver_other(hp, req, error_name(p.error_code), p)


def answer(p: hot_codec.FetchAnswer) -> pr.FetchResponse:
    """A partition's Fetch answer (correlation id and offset filled in by the rounds)."""
    diverging = p.diverging_epoch
    return pr.FetchResponse(
        error_name(p.error_code),
        0,
        0,
        p.high_watermark,
        p.log_start_offset,
        bytes(p.records or b""),
        pr.EpochEndOffset(diverging[0], diverging[1])
        if diverging is not None and diverging[0] >= 0
        else None,
    )
