"""librdkafka's implicit acknowledgements, read from its `eos` debug log.

librdkafka reports messages delivered without their own answer when a later batch of
the same partition succeeds ("IMPLICITACK ... N message(s) implicitly acked by
subsequent batch success (msgids A..B, ...)"): it takes the later success as proof that
the earlier batch was written (docs/replication-rules.md 5.6). A chaos run records each
such acknowledgement as an `implicit_ack` history event with the values it covered, and
the checker fails the run when one of them is not in the log (`implicit_ack_missing`).

Message ids are per partition and 1-based, in the order the messages were handed to
`produce()`, so the values are found from the producer's own send order.

The same log says when librdkafka bumps its producer epoch, why, and which message of
each partition it renumbered from sequence 0 (docs/chaos-reports/2026-12-02-gray-failures/).
With `bumps` set, each becomes a history event: `epoch_bump` (the reason, and for
"skipped sequence numbers" the OUT_OF_ORDER_SEQUENCE_NUMBER answer that set it off: the
broker, the partition, and the failed request before it) and `renumbered` (per
partition: the message id, and its value, that the new epoch starts at sequence 0).
chaos/duplicate_origins.py ties an `epoch_bump` duplicate to them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TextIO

_IMPLICIT_ACK = re.compile(
    r"(?P<topic>\S+) \[(?P<partition>\d+)\] (?P<count>\d+) message\(s\) implicitly acked "
    r"by subsequent batch success \(msgids (?P<first>\d+)\.\.(?P<last>\d+)"
)

# librdkafka's rd_kafka_handle_idempotent_Produce_error (OUT_OF_ORDER_SEQUENCE_NUMBER
# on a request behind a failed one), rd_kafka_idemp_drain_epoch_bump and
# rd_kafka_toppar_pid_change.
_SKIPPED = re.compile(
    r"thrd:[^\]]*/(?P<broker>\d+)\].*ProduceRequest for (?P<topic>\S+) \[(?P<partition>\d+)\] "
    r"with (?P<count>\d+) message\(s\) failed due to skipped sequence numbers "
    r"\(PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\}, base seq (?P<base_seq>-?\d+) > next seq "
    r"(?P<next_seq>-?\d+)\) caused by previous failed request \((?P<previous_error>\w+), "
    r"actions (?P<previous_actions>.*?), "
    r"base seq (?P<previous_first>-?\d+)\.\.(?P<previous_last>-?\d+)"
)
_DRAIN_BUMP = re.compile(
    r"Beginning partition drain in state \S+ for PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\} "
    r"epoch bump for (?P<partitions>\d+) partition\(s\) with in-flight requests: (?P<reason>.*)$"
)
_NEW_PID = re.compile(
    r"(?P<topic>\S+) \[(?P<partition>\d+)\] changed PID\{Id:(?P<pid>\d+),Epoch:(?P<from>\d+)\} "
    r"-> PID\{Id:(?P<new_pid>\d+),Epoch:(?P<to>\d+)\} with base MsgId (?P<msgid>\d+)"
)

MAX_CALLBACK_ERRORS = 20

_BUMP_WORDS = ("ERRSEQ", "epoch bump", "NEWPID")


class ImplicitAckRecorder(logging.Handler):
    """A logging handler for one confluent-kafka producer (its `logger` setting): every
    line goes on to `echo` (the run's log, as librdkafka wrote it there itself before),
    IMPLICITACK lines also become history
    events through `record`, epoch bumps through `bumps` (when given)."""

    def __init__(
        self,
        process: str,
        record: Callable[[dict[str, Any]], None],
        echo: TextIO | None = None,
        bumps: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(logging.DEBUG)
        self.process = process
        self._record = record
        self._echo = echo
        self._bumps = bumps
        self._cause: dict[str, Any] | None = None  # the last skipped-sequence answer
        self._lock = threading.Lock()
        # partition -> values in produce() order: msgid n is the n-th of them
        self._sent: dict[int, list[str]] = defaultdict(list)
        self.implicit_acks = 0
        self.callback_errors: list[str] = []  # what emit raised (the first few)

    def sent(self, partition: int, value: str) -> None:
        """A value handed to produce() for `partition` (call in produce order)."""
        with self._lock:
            self._sent[partition].append(value)

    def logger(self) -> logging.Logger:
        log = logging.getLogger(f"seglog.chaos.rdkafka.{self.process}")
        log.handlers[:] = [self]
        log.setLevel(logging.DEBUG)
        log.propagate = False
        return log

    def emit(self, record: logging.LogRecord) -> None:
        # An exception must not leave a librdkafka callback: confluent-kafka hands it
        # back out of the next poll or flush mangled (a SystemError naming no cause).
        try:
            self._emit(record)
        except Exception as e:  # noqa: BLE001 - kept, and reported by the workload
            if len(self.callback_errors) < MAX_CALLBACK_ERRORS:
                self.callback_errors.append(f"log callback: {type(e).__name__}: {e}")

    def _emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if self._echo is not None:
            print(f"rdkafka {self.process}: {line}", file=self._echo, flush=True)
        if self._bumps is not None and (
            "ERRSEQ" in line or "epoch bump" in line or "NEWPID" in line
        ):
            self._epoch_bump(line)
            return
        m = _IMPLICIT_ACK.search(line)
        if m is None:
            return
        partition, first, last = int(m["partition"]), int(m["first"]), int(m["last"])
        with self._lock:
            sent = self._sent[partition]
            values = sent[first - 1 : last]
        self.implicit_acks += last - first + 1
        self._record(
            {
                "type": "implicit_ack",
                "t": time.time(),
                "process": self.process,
                "topic": m["topic"],
                "partition": partition,
                "msgids": [first, last],
                "values": values,
            }
        )

    def _epoch_bump(self, line: str) -> None:
        assert self._bumps is not None
        if (m := _SKIPPED.search(line)) is not None:
            # Logged just before the drain it starts, on the same thread.
            self._cause = {
                "error": "OUT_OF_ORDER_SEQUENCE_NUMBER",
                "broker": int(m["broker"]),
                "partition": int(m["partition"]),
                "base_seq": int(m["base_seq"]),
                "next_seq": int(m["next_seq"]),
                "previous_error": m["previous_error"],
                "previous_actions": m["previous_actions"],
                "previous_seqs": [int(m["previous_first"]), int(m["previous_last"])],
            }
        elif (m := _DRAIN_BUMP.search(line)) is not None:
            cause, self._cause = self._cause, None
            self._bumps(
                {
                    "type": "epoch_bump",
                    "t": time.time(),
                    "process": self.process,
                    "producer_id": int(m["pid"]),
                    "from_epoch": int(m["epoch"]),
                    "reason": m["reason"],
                    "cause": cause if m["reason"] == "skipped sequence numbers" else None,
                }
            )
        elif (m := _NEW_PID.search(line)) is not None:
            partition, msgid = int(m["partition"]), int(m["msgid"])
            with self._lock:
                sent = self._sent[partition]
                value = sent[msgid - 1] if 0 < msgid <= len(sent) else None
            self._bumps(
                {
                    "type": "renumbered",
                    "t": time.time(),
                    "process": self.process,
                    "producer_id": int(m["new_pid"]),
                    "topic": m["topic"],
                    "partition": partition,
                    "from_epoch": int(m["from"]),
                    "to_epoch": int(m["to"]),
                    "msgid": msgid,  # sequence 0 of the new epoch
                    "value": value,
                }
            )
