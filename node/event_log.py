"""Structured logs: one JSON object a line on stderr, an `event` name plus fields."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from seglog.storage.disk_and_clock import plain_monotonic_s


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            body.update(fields)
        if record.exc_info:
            body["error"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, separators=(",", ":"))


def configure(level: str = "INFO", node_id: int | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger("seglog")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    if node_id is not None:
        _STATIC["node"] = node_id


_STATIC: dict[str, Any] = {}


class EventLogger:
    """`log.info("produce", topic=t, partition=p)` writes one JSON line."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(f"seglog.{name}")

    def _emit(self, level: int, event: str, fields: dict[str, Any], exc: bool = False) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(level, event, extra={"fields": {**_STATIC, **fields}}, exc_info=exc)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, exc: bool = False, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields, exc)


def monotonic_ms() -> int:
    return int(plain_monotonic_s() * 1000)
