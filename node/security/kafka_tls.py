"""TLS on a Kafka listener: the listener's current `ssl.SSLContext`, built again
when its keystore or truststore files change (connections made before keep theirs)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Mapping

from ..event_log import EventLogger
from .ssl_config import ReloadingSsl, load_ssl_config

_log = EventLogger("security")


class ListenerTls:
    def __init__(self, props: Mapping[str, str], listener: str) -> None:
        self.listener = listener
        self._reloading = ReloadingSsl(
            lambda: load_ssl_config(props, listener),
            lambda why: _log.error("ssl_reload_failed", listener=listener, error=why),
        )
        self._lock = threading.Lock()
        self._context = self._reloading.config.server_context()

    def context(self) -> ssl.SSLContext:
        """The context for a new connection (the files are looked at once a second)."""
        with self._lock:
            if self._reloading.check():
                try:
                    self._context = self._reloading.config.server_context()
                    _log.info("ssl_reloaded", listener=self.listener)
                except ssl.SSLError as e:
                    _log.error("ssl_reload_failed", listener=self.listener, error=str(e))
            return self._context
