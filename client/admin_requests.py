"""What every admin operation stands on: one request retried against the cluster
until it succeeds, fails for good or the request timeout passes, and the error
shapes the operations share.

Transport failures (a node that is down or restarting) and NOT_CONTROLLER are
retried against any reachable node until `request_timeout_ms` has passed; then
the last error is raised (NoBrokersAvailable names the addresses it tried).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2

from .admin_types import ConfigEntry
from .cluster import ClusterMetadata, call
from .errors import (
    BootstrapUnreachable,
    KafkaError,
    NoBrokersAvailable,
    NodeNotReadyError,
    for_code,
)

T = TypeVar("T")
_log = logging.getLogger("seglog.client.admin")  # the admin client's logger, as before the split

_RETRY_BACKOFF_S = 0.1
_MAX_RETRY_BACKOFF_S = 1.0


class StaleLeadership(Exception):
    """Inside an attempt: a partition's leader moved or is being elected; refresh
    metadata and try again. Carries the error to raise if time runs out."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def topic_error(name: str, code: int, message: str) -> KafkaError:
    # Node messages usually name the topic already; config errors do not.
    if repr(name) not in message:
        message = f"topic {name!r}: {message}" if message else f"topic {name!r}"
    return for_code(code, message)


def raise_batch(
    errors: dict[str, KafkaError], results: Mapping[str, object], order: Sequence[str]
) -> None:
    """A batch call's outcome: raise the first failed item's error (in `order`), with
    `.topic`, `.errors` and `.results` telling what happened to the rest."""
    if not errors:
        return
    first = next(n for n in order if n in errors)
    exc = errors[first]
    exc.topic = first  # type: ignore[attr-defined]
    exc.errors = dict(errors)  # type: ignore[attr-defined]
    exc.results = dict(results)  # type: ignore[attr-defined]
    raise exc


def config_entries(result: pb.DescribeConfigsResult) -> dict[str, ConfigEntry]:
    """One resource's DescribeConfigs answer, by config name."""
    return {
        c.name: ConfigEntry(c.name, c.value, c.source, c.is_default, c.read_only, c.is_sensitive)
        for c in result.configs
    }


class AdminRequests:
    """The base of the Admin's per-area operations: the cluster's metadata and the
    retry loop they all run their requests in (the Admin sets the attributes)."""

    client_id: str
    request_timeout_ms: int
    _metadata: ClusterMetadata
    _closed: bool

    def _retrying(self, attempt: Callable[[float], T]) -> T:
        """Run `attempt(timeout_s)` until it succeeds, fails for good, or the request
        timeout passes. Only failures that say nothing about the request itself
        (unreachable node, not the controller, a moved leader) are retried."""
        if self._closed:
            raise KafkaError("the admin client is closed")
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        backoff = _RETRY_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                return attempt(max(remaining, 0.001))
            except BootstrapUnreachable:
                raise  # no seglog node at any bootstrap address: waiting will not help
            except (NoBrokersAvailable, NodeNotReadyError) as e:
                last: KafkaError = e
            except StaleLeadership as e:
                last = e.error
            self._metadata.request_update()
            remaining = deadline - time.monotonic()
            if remaining <= backoff:
                raise self._give_up(last)
            _log.info("retrying in %.1fs (%.1fs left): %s", backoff, remaining, last)
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_RETRY_BACKOFF_S)

    def _give_up(self, last: KafkaError) -> KafkaError:
        if isinstance(last, NoBrokersAvailable | NodeNotReadyError):
            addresses = ", ".join(f"{h}:{p}" for h, p in self._metadata.bootstrap)
            detail = str(last.args[0]) if last.args else ""
            return NoBrokersAvailable(
                f"cannot reach {addresses} within {self.request_timeout_ms} ms"
                + (f" ({short_detail(detail)})" if detail else "")
            )
        return last

    def _stub(self, controller: bool) -> client_pb2_grpc.SegLogStub:
        """The controller's stub (admin writes go there, as in Kafka), else any node.
        Not a fenced broker's: its controller process may be the active controller
        while the broker itself is frozen, and any node forwards admin writes."""
        if self._metadata.stale():
            self._metadata.refresh([])
        if controller:
            address = self._metadata.serving_address(self._metadata.controller_id)
            if address is not None:
                return self._metadata.connections.stub(address)
        return self._metadata.any_stub()

    def _rpc(
        self,
        method: str,
        request: object,
        codes: Callable[[Any], Iterable[int]],
        controller: bool = True,
    ) -> Any:
        """One admin RPC. `codes` lists the response's per-item error codes: a node
        that is not the controller (any more) means refresh and resend."""
        not_controller = errors_pb2.ErrorCode.Value("NOT_CONTROLLER")

        def attempt(timeout_s: float) -> Any:
            stub = self._stub(controller)
            response = call(getattr(stub, method), request, timeout_s)
            if not_controller in set(codes(response)):
                raise StaleLeadership(
                    for_code(not_controller, f"{method} reached a non-controller")
                )
            return response

        return self._retrying(attempt)

    def _timeout_ms(self, timeout_ms: int | None) -> int:
        """A call's own timeout, or the client's request timeout."""
        return timeout_ms if timeout_ms is not None else self.request_timeout_ms


def short_detail(detail: str) -> str:
    """gRPC's connect errors are long; keep the part that says why."""
    for marker, short in (
        ("Connection refused", "connection refused"),
        ("Domain name not found", "host name not found"),
        ("Name or service not known", "host name not found"),
        ("No route to host", "no route to host"),
        ("Deadline Exceeded", "no answer"),
    ):
        if marker in detail:
            return short
    return detail
