"""Whether the broker process can serve, judged without I/O (time is an argument).

A combined node's heartbeats leave from its controller process (`controller_process`),
which would go on sending them for a broker that is frozen, deadlocked or stuck on a
disk: the node kept its leaderships and every produce to them timed out (issue 39).
So liveness comes from the broker itself, as in Kafka, whose broker sends its own
heartbeats (BrokerLifecycleManager):

* `StallWatchdog`, in the broker: the loops that must keep going round beat it, and it
  names the one that stopped for longer than its bound;
* `PulseGate`, in the controller process: the broker's pulses (sent while the watchdog
  finds nothing stalled) open it; the heartbeats are relayed only while it is open, so a
  broker that stops pulsing is fenced a session later and its partitions fail over.
"""

from __future__ import annotations


def pulse_max_age_s(session_timeout_ms: int) -> float:
    """How old the broker's last pulse may be for a heartbeat to be relayed: a third of
    broker.session.timeout.ms, so a frozen broker is fenced within a session and a
    third of freezing, while a pause of a few pulses (a GC) costs no heartbeat."""
    return session_timeout_ms / 3000


def pulse_interval_s(session_timeout_ms: int, heartbeat_interval_ms: int) -> float:
    """How often the broker pulses: at least twice per heartbeat and four times per
    gate age."""
    return min(heartbeat_interval_ms / 2000, pulse_max_age_s(session_timeout_ms) / 4)


# At most this many watched loops: a handful of names, fixed in the code.
MAX_WATCHED = 64


class StallWatchdog:
    """Named loops beat it, and named operations report when the oldest of them in
    flight started; `stalled` names a loop that has not beaten, or an operation that
    has not returned, for longer than `bound_s`."""

    def __init__(self, bound_s: float) -> None:
        if bound_s <= 0:
            raise ValueError(f"the stall bound must be positive: {bound_s} s")
        self.bound_s = bound_s
        self._beats: dict[str, float] = {}
        self._in_flight: dict[str, float] = {}

    def beat(self, name: str, now: float) -> None:
        if name not in self._beats and len(self._beats) >= MAX_WATCHED:
            raise ValueError(f"more than {MAX_WATCHED} watched loops: {name!r}")
        self._beats[name] = now

    def forget(self, name: str) -> None:
        """The loop ended in order (a shutdown): no longer watched."""
        self._beats.pop(name, None)

    def in_flight(self, name: str, started: float | None) -> None:
        """The oldest operation of kind `name` now running started at `started`
        (None: none is running)."""
        if started is None:
            self._in_flight.pop(name, None)
            return
        if name not in self._in_flight and len(self._in_flight) >= MAX_WATCHED:
            raise ValueError(f"more than {MAX_WATCHED} watched operations: {name!r}")
        self._in_flight[name] = started

    def stalled(self, now: float) -> str | None:
        """The reason the broker cannot serve (what stalled longest), or None."""
        worst: tuple[float, str] | None = None
        entries = [(n, at, "stalled") for n, at in list(self._beats.items())]
        entries += [(n, at, "in flight") for n, at in list(self._in_flight.items())]
        for name, at, how in entries:
            age = now - at
            if age > self.bound_s and (worst is None or age > worst[0]):
                worst = (age, f"{name} {how}")
        if worst is None:
            return None
        return f"{worst[1]} for {worst[0]:.1f} s (bound {self.bound_s:.1f} s)"


class PulseGate:
    """The controller process's view of its broker: open while the last pulse is at most
    `max_age_s` old and said the broker is serving."""

    def __init__(self, max_age_s: float) -> None:
        if max_age_s <= 0:
            raise ValueError(f"the pulse age bound must be positive: {max_age_s} s")
        self.max_age_s = max_age_s
        self._last: float | None = None
        self._stalled: str | None = None
        self._was_open = False

    def pulse(self, now: float, stalled: str | None = None) -> None:
        """The broker said it is alive; `stalled` is the reason it cannot serve, if any."""
        self._last = now
        self._stalled = stalled

    def is_open(self, now: float) -> bool:
        return (
            self._last is not None and self._stalled is None and now - self._last <= self.max_age_s
        )

    def why_closed(self, now: float) -> str:
        if self._last is None:
            return "no pulse from the broker yet"
        if self._stalled is not None:
            return f"the broker cannot serve: {self._stalled}"
        return f"no pulse from the broker for {now - self._last:.2f} s"

    @property
    def stalled_reason(self) -> str | None:
        """What the broker's last pulse said stalled (None: nothing, or no pulse)."""
        return self._stalled

    def changed(self, now: float) -> bool | None:
        """The gate's new state when it changed since the last call (for a log line
        per transition), else None."""
        is_open = self.is_open(now)
        if is_open == self._was_open:
            return None
        self._was_open = is_open
        return is_open


def parse_pulse(line: bytes) -> tuple[bool, str | None]:
    """A pulse line from the broker: `alive` or `stalled <reason>`. Returns (is a
    pulse, stalled reason); anything else is not a pulse (False, None)."""
    text = line.decode("utf-8", "replace").strip()
    if text == "alive":
        return True, None
    if text.startswith("stalled "):
        return True, text[len("stalled ") :] or "unknown"
    return False, None


def pulse_line(stalled: str | None) -> bytes:
    """The line the broker writes to its controller process's stdin."""
    if stalled is None:
        return b"alive\n"
    return ("stalled " + stalled.replace("\n", " ") + "\n").encode()
