"""The leader's side of a follower's Fetch on the Kafka listener (replica.fetch.protocol
=kafka): Kafka's inter-broker Fetch, with the follower's id (ReplicaId before v15,
ReplicaState from v15, KIP-903's broker epoch included) in a KIP-227 session.

The fetch is the session's (node/session_fetch.py): on the event loop it looks at
once, and parks on the session's waiter when nothing is due, each wake of the
session's partitions scheduling one more look, until enough bytes, an error or
max.wait.ms; with the threaded listener model a delayed thread runs the blocking form.
A follower needs CLUSTER_ACTION on the cluster (Kafka's rule for replica fetches)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.partition_metadata import topic_id_to_uuid, uuid_to_topic_id

from ..fetch_session import FetchSessionError
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.kafka_gate import allowed
from .codec import KafkaRequest, Part
from .deferred import Deferred, Done, OnLoop
from .fetch_requests import fetch_spec, split_unknown
from .node_api import KafkaNode

MAX_REPLICA_WAIT_MS = 30_000
CLUSTER = ResourceType.CLUSTER


class KafkaApis(Protocol):
    """What a replica's fetch needs of the listener's handlers (node/kafka/handlers.py)."""

    node: KafkaNode
    stopped: threading.Event

    @property
    def authorizer(self) -> Any: ...
    def fetch_topics(self, request: KafkaRequest) -> tuple[list[tuple[str, Any]], Any]: ...
    def fetch_response(
        self,
        request: KafkaRequest,
        results: list[Any],
        ids: Any = None,
        session_id: int = 0,
        error: str = "NONE",
    ) -> list[Part]: ...


def replica_of(request: KafkaRequest) -> tuple[int, int]:
    """(replica id, broker epoch) of a Fetch: (-1, -1) for a consumer's."""
    req = request.body
    if request.api_version >= 15:
        state = req.replica_state
        return (state.replica_id, state.replica_epoch) if state is not None else (-1, -1)
    return req.replica_id, -1


def fetch(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    req = request.body
    replica_id, replica_epoch = replica_of(request)
    if not allowed(apis.authorizer, AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return apis.fetch_response(request, [], error="CLUSTER_AUTHORIZATION_FAILED")
    topics, ids = apis.fetch_topics(request)
    # A topic id this node does not know yet (its metadata is behind the follower's)
    # is answered UNKNOWN_TOPIC_ID and kept out of the session: the follower asks
    # again once it backed off.
    topics, unknown = split_unknown(topics, ids)
    specs = [
        fetch_spec(name, p, request.api_version, replica=True)
        for name, t in topics
        for p in t.partitions
    ]
    forgotten = [
        (forgotten_name(apis, request, f), p)
        for f in (req.forgotten_topics_data or [])
        for p in f.partitions
    ]
    rm = apis.node.replica_manager
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 1 << 30, apis.node.fetch_max_bytes)
    try:
        steps = rm.park_session_fetch(
            req.session_id,
            req.session_epoch,
            specs,
            forgotten,
            replica_id=replica_id,
            min_bytes=max(req.min_bytes, 1),
            max_bytes=max_bytes,
            replica_epoch=replica_epoch,
            topic_ids=ids,
        )
    except FetchSessionError as e:
        return apis.fetch_response(request, [], error=e.error_name)
    session = steps.session
    wait_s = min(max(req.max_wait_ms, 0), MAX_REPLICA_WAIT_MS) / 1000

    def respond() -> list[Part]:
        results = unknown + steps.answer()
        if ids is not None:  # v13+: every answered topic by id, the session's too
            topics = apis.node.metadata_image().topics
            for r in results:
                if r.topic in ids:
                    continue
                if r.topic in session.topic_ids:  # a deleted topic's, by its old id
                    ids[r.topic] = session.topic_ids[r.topic]
                elif r.topic in topics:
                    ids[r.topic] = topic_id_to_uuid(topics[r.topic].topic_id)
        return apis.fetch_response(request, results, ids, session_id=session.session_id)

    if steps.look() or unknown or wait_s == 0:
        return respond()

    def wait() -> list[Part]:
        # The threaded model's delayed thread: the blocking form of the same steps.
        deadline = plain_monotonic_s() + wait_s
        with session.lock:
            # Bounded by the deadline: each pass waits for a wake or the time left.
            while not apis.stopped.is_set():
                remaining = deadline - plain_monotonic_s()
                if remaining <= 0:
                    break
                if rm.wakeups.wait(session.waiter, min(remaining, 0.5)) and steps.look():
                    break
        return respond()

    def begin(done: Done) -> None:
        def answer(_: None) -> list[Part]:
            rm.wakeups.unpark(session.waiter)
            return respond()

        on_loop: OnLoop[None] = OnLoop(done, answer, wait_s)

        def look() -> None:
            if on_loop.finished:
                return
            if steps.look() or apis.stopped.is_set():
                on_loop.finish()

        rm.wakeups.park(session.waiter, lambda: on_loop.soon(look))

    return Deferred(wait, begin)


def forgotten_name(apis: KafkaApis, request: KafkaRequest, f: Any) -> str:
    """A forgotten topic's name (by id from v13; an unknown id stands for its text)."""
    if request.api_version < 13:
        return str(f.topic)
    names = apis.node.metadata_image().topic_names_by_id
    return names.get(uuid_to_topic_id(f.topic_id), str(f.topic_id))
