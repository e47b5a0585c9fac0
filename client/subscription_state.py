"""How a consumer chose what it reads (Kafka's SubscriptionState, its subscription
type): topics by name, a topic pattern, or partitions assigned by hand; and the
rebalance listener a group subscription calls."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .cluster import TopicPartition
from .errors import IllegalStateError


class ConsumerRebalanceListener:
    """kafka-python's ConsumerRebalanceListener: called in the thread that polls.
    on_partitions_lost defaults to on_partitions_revoked (as in Kafka)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


class SubscriptionState:
    """At most one of `topics` and `pattern` is set (subscribe()); `manual` while
    partitions are assigned by hand (assign())."""

    def __init__(self) -> None:
        self.topics: set[str] | None = None
        self.pattern: re.Pattern[str] | None = None
        self.manual = False
        self.listener: object = None

    @property
    def subscribed(self) -> bool:
        return self.topics is not None or self.pattern is not None

    def subscribe(self, topics: Iterable[str] | str, pattern: str | None, listener: object) -> None:
        if self.manual:
            raise IllegalStateError("subscribe() cannot follow assign(); unsubscribe() first")
        names = [topics] if isinstance(topics, str) else list(topics)
        if bool(names) == (pattern is not None):
            raise ValueError("subscribe() needs either topics or a pattern")
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"topic names must be non-empty strings, got {name!r}")
        self.topics = None if pattern is not None else set(names)
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.listener = listener

    def unsubscribe(self) -> None:
        self.topics = None
        self.pattern = None
        self.manual = False

    def matching(self, topics: Iterable[str]) -> set[str]:
        """The topics the pattern matches."""
        assert self.pattern is not None
        return {t for t in topics if self.pattern.fullmatch(t)}

    def call_listener(self, method: str, tps: frozenset[TopicPartition]) -> None:
        """The listener's `method` with the partitions (on_partitions_lost falls back
        to on_partitions_revoked, as in Kafka)."""
        if self.listener is None:
            return
        fn = getattr(self.listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(self.listener, "on_partitions_revoked", None)
        if fn is not None:
            fn(set(tps))
