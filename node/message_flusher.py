"""flush.messages off the event loop (issue 40). A leader's or follower's append that
reaches the partition's `flush.messages` asks for an fsync (Log.defer_message_flushes);
the replica holds the appends' answers, or its next fetch, until it is done. Here the
fsyncs run: in a small pool, one job per partition at a time, so a slow disk stalls
only the partitions waiting on it, never the loop that serves the others."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .hosted_partition import HostedPartition, TopicPartition
from .log_manager import LogManager

FLUSHERS = 2  # Kafka flushes in its request threads; two fsyncs at once keep a disk busy


class MessageFlusher:
    """Runs each requested partition's demanded flush once, then `on_flushed`. A
    partition asked for again while queued is not queued twice; asked while its job
    runs, it runs once more after (the job may have started below the new demand).
    Queued work is bounded by the number of partitions."""

    def __init__(
        self, log_manager: LogManager, on_flushed: Callable[[HostedPartition], None]
    ) -> None:
        self._log_manager = log_manager
        self._on_flushed = on_flushed
        self._lock = threading.Lock()
        self._queued: set[TopicPartition] = set()
        self._pool = ThreadPoolExecutor(FLUSHERS, thread_name_prefix="message-flush")

    def request(self, hp: HostedPartition) -> None:
        with self._lock:
            if hp.tp in self._queued:
                return
            self._queued.add(hp.tp)
        try:
            self._pool.submit(self._run, hp)
        except RuntimeError:  # shut down: the node is stopping, its close flushes
            with self._lock:
                self._queued.discard(hp.tp)

    def _run(self, hp: HostedPartition) -> None:
        with self._lock:
            self._queued.discard(hp.tp)
        plog = hp.plog
        if plog.directory.offline_reason is not None:
            return  # its held answers failed with KAFKA_STORAGE_ERROR when it went offline
        with plog.lock:
            job = plog.log.begin_demanded_flush()
        if job is not None:
            self._log_manager.run_flush(hp.tp, plog, job)
        if plog.directory.offline_reason is None:
            self._on_flushed(hp)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
