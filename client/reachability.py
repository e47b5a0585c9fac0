"""Whether a client still reaches the cluster: a consumer whose nodes are all gone
must not just return nothing forever. Pure (time is an input); the Fetcher reports
each call's outcome and logs the warning this returns, once per outage."""

from __future__ import annotations


class Reachability:
    """An outage starts at the first failed call after a success (or at the first
    call) and ends at the next success; one that lasts `timeout_s` (the client's
    request_timeout_ms) is reported once."""

    def __init__(self, timeout_s: float) -> None:
        assert timeout_s > 0
        self.timeout_s = timeout_s
        self.outage_since: float | None = None
        self.last_error = ""
        self._reported = False
        self.counters: dict[str, int] = {
            "request_failures_total": 0,  # calls that reached no node
            "unreachable_reports_total": 0,  # outages that lasted request_timeout_ms
        }

    def succeeded(self) -> None:
        self.outage_since = None
        self._reported = False

    def failed(self, now: float, error: str) -> str | None:
        """Record a call that reached no node; the warning to log when the outage has
        just reached the timeout, else None."""
        self.counters["request_failures_total"] += 1
        self.last_error = error
        if self.outage_since is None:
            self.outage_since = now
        lasted = now - self.outage_since
        if self._reported or lasted < self.timeout_s:
            return None
        self._reported = True
        self.counters["unreachable_reports_total"] += 1
        return (
            f"no node reachable for {lasted:.1f} s (request_timeout_ms "
            f"{self.timeout_s * 1000:.0f}); still retrying; last error: {error}"
        )

    def unreachable_s(self, now: float) -> float:
        """How long the current outage has lasted (0 when the cluster answers)."""
        return 0.0 if self.outage_since is None else now - self.outage_since
