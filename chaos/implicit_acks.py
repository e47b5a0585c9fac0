"""librdkafka's implicit acknowledgements, read from its `eos` debug log.

librdkafka reports messages delivered without their own answer when a later batch of
the same partition succeeds ("IMPLICITACK ... N message(s) implicitly acked by
subsequent batch success (msgids A..B, ...)"): it takes the later success as proof that
the earlier batch was written (docs/replication-rules.md 5.6). A chaos run records each
such acknowledgement as an `implicit_ack` history event with the values it covered, and
the checker fails the run when one of them is not in the log (`implicit_ack_missing`).

Message ids are per partition and 1-based, in the order the messages were handed to
`produce()`, so the values are found from the producer's own send order.
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


class ImplicitAckRecorder(logging.Handler):
    """A logging handler for one confluent-kafka producer (its `logger` setting): every
    line goes on to `echo` (the run's log, as librdkafka wrote it there itself before),
    IMPLICITACK lines also become history
    events through `record`."""

    def __init__(
        self,
        process: str,
        record: Callable[[dict[str, Any]], None],
        echo: TextIO | None = None,
    ) -> None:
        super().__init__(logging.DEBUG)
        self.process = process
        self._record = record
        self._echo = echo
        self._lock = threading.Lock()
        # partition -> values in produce() order: msgid n is the n-th of them
        self._sent: dict[int, list[str]] = defaultdict(list)
        self.implicit_acks = 0

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
        line = record.getMessage()
        if self._echo is not None:
            print(f"rdkafka {self.process}: {line}", file=self._echo, flush=True)
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
