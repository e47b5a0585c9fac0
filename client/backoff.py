"""Exponential retry backoff with jitter (retry.backoff.ms up to retry.backoff.max.ms)."""

from __future__ import annotations

import random


class Backoff:
    """Exponential backoff with jitter, capped."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s

    def delay(self, failures: int) -> float:
        base = min(self.max_s, self.initial_s * 2 ** min(max(failures - 1, 0), 16))
        return base * random.uniform(0.8, 1.2)
