"""What a Kafka handler answers (the socket server's contract with the APIs and the
security gate): the parts of its response frame, None for no response (a Produce
with acks=0), or a Deferred for a request it has started but that continues on a
delayed thread (an acks=all Produce, a long-polling Fetch)."""

from __future__ import annotations

from collections.abc import Callable

from .codec import KafkaRequest, Part


class Deferred:
    """A handler's answer for a request it has started but not finished: wait() (on
    the handler thread) returns the response parts (None: no response)."""

    def __init__(self, wait: Callable[[], list[Part] | None]) -> None:
        self.wait = wait


# A handler: request → the parts of its response frame, None for no response (a
# Produce with acks=0), or a Deferred for one that continues after it started.
Handler = Callable[[KafkaRequest], "list[Part] | None | Deferred"]
