"""A listener's TLS settings by Kafka's names, read from PEM files, and what they
build: an `ssl.SSLContext` for the Kafka listener and gRPC credentials for the gRPC
listeners and the node's own calls to other nodes.

Kafka's keys, each also settable per listener as `listener.name.<name>.<key>`:
`ssl.keystore.type` (PEM only), `ssl.keystore.location` (a PEM file holding the
private key and the certificate chain) or `ssl.keystore.key` + `ssl.keystore.certificate.chain`
(the PEM text itself), `ssl.key.password`, `ssl.truststore.type` (PEM),
`ssl.truststore.location` or `ssl.truststore.certificates`, `ssl.client.auth`
(required, requested, none), `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) and
`ssl.cipher.suites`."""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.errors import InvalidConfigError

CLIENT_AUTH = ("required", "requested", "none")
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
# The keys a listener's TLS reads (Kafka's), for the per-listener prefix.
SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
)


def listener_setting(props: Mapping[str, str], listener: str | None, key: str) -> str | None:
    """`listener.name.<listener>.<key>` when set, else `<key>` (Kafka's precedence)."""
    if listener:
        specific = props.get(f"listener.name.{listener.lower()}.{key}")
        if specific is not None:
            return specific
    return props.get(key)


@dataclass(frozen=True)
class SslConfig:
    """One listener's TLS material, loaded and checked. `key_pem` is the private key
    unencrypted (what gRPC takes), held in memory only."""

    listener: str
    key_pem: bytes | None
    chain_pem: bytes | None
    trust_pem: bytes | None
    client_auth: str
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    ciphers: str | None  # OpenSSL names, TLS 1.2 suites
    files: tuple[Path, ...]  # what a reload watches

    @property
    def has_keystore(self) -> bool:
        return self.key_pem is not None and self.chain_pem is not None

    # --- Python ssl (the Kafka listener) ----------------------------------------------

    def server_context(self) -> ssl.SSLContext:
        if not self.has_keystore:
            raise InvalidConfigError(
                f"listener {self.listener} serves TLS but has no ssl.keystore.location "
                "(or ssl.keystore.key and ssl.keystore.certificate.chain)"
            )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._common(ctx)
        ctx.verify_mode = {
            "required": ssl.CERT_REQUIRED,
            "requested": ssl.CERT_OPTIONAL,
            "none": ssl.CERT_NONE,
        }[self.client_auth]
        return ctx

    def client_context(self, check_hostname: bool) -> ssl.SSLContext:
        """What this node presents when it dials another node's listener of the same
        name (a follower's fetcher): the listener's keystore, its truststore."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = check_hostname  # ssl.endpoint.identification.algorithm
        self._common(ctx)
        return ctx

    def _common(self, ctx: ssl.SSLContext) -> None:
        ctx.minimum_version = self.min_version
        ctx.maximum_version = self.max_version
        if self.ciphers:
            ctx.set_ciphers(self.ciphers)
        if self.trust_pem is not None:
            ctx.load_verify_locations(cadata=self.trust_pem.decode("ascii"))
        if self.has_keystore:
            assert self.key_pem is not None and self.chain_pem is not None
            load_cert_chain(ctx, self.chain_pem, self.key_pem)


def load_cert_chain(ctx: ssl.SSLContext, chain_pem: bytes, key_pem: bytes) -> None:
    """`SSLContext.load_cert_chain` reads files only: the PEM goes to a private
    temporary file that is removed once read."""
    with tempfile.TemporaryDirectory(prefix="seglog-tls-") as d:
        path = Path(d) / "keystore.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem + b"\n" + chain_pem)
        ctx.load_cert_chain(str(path))


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InvalidConfigError(f"Invalid value {path} for configuration {key}: {e}") from None


def _private_key(key: str, pem: bytes, password: str | None) -> bytes:
    try:
        loaded: PrivateKeyTypes = serialization.load_pem_private_key(
            pem, password.encode() if password else None
        )
    except (ValueError, TypeError) as e:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: no usable PEM private key ({e})"
        ) from None
    return loaded.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificates(key: str, pem: bytes) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: no PEM certificate ({e})"
        ) from None
    return certs


def _pem(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def iana_to_openssl(name: str) -> str:
    """Kafka lists cipher suites by their IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256);
    OpenSSL has its own (ECDHE-RSA-AES128-GCM-SHA256). An OpenSSL name passes as is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kex, _, cipher = name[4:].partition("_WITH_")
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256")
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
    return f"{kex}_{cipher}".replace("_", "-")


def _ciphers(raw: str | None, key: str) -> str | None:
    if raw is None or not raw.strip():
        return None
    names = [iana_to_openssl(n.strip()) for n in raw.split(",") if n.strip()]
    known = {c["name"] for c in ssl.create_default_context().get_ciphers()}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with contextlib.suppress(ssl.SSLError):
        ctx.set_ciphers("ALL")
        known |= {c["name"] for c in ctx.get_ciphers()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {key}: unknown cipher suites {unknown}"
        )
    return ":".join(names)


def _protocols(raw: str, key: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in PROTOCOLS]
    if bad or not names:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {key}: seglog serves "
            f"{', '.join(PROTOCOLS)} only (got {bad or 'nothing'})"
        )
    versions = sorted(PROTOCOLS[n] for n in names)
    return versions[0], versions[-1]


def load_ssl_config(props: Mapping[str, str], listener: str | None) -> SslConfig:
    """A listener's TLS settings; a bad value is an error naming its key."""

    def get(key: str) -> str | None:
        return listener_setting(props, listener, key)

    name = listener or "client"
    files: list[Path] = []
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        value = (get(key) or "PEM").strip().upper()
        if value != "PEM":
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: seglog reads PEM files only"
            )
    password = get("ssl.key.password") or get("ssl.keystore.password")
    key_pem = chain_pem = None
    location = get("ssl.keystore.location")
    if location:
        data = _read("ssl.keystore.location", location)
        files.append(Path(location))
        key_pem = _private_key("ssl.keystore.location", data, password)
        chain_pem = _pem(_certificates("ssl.keystore.location", data))
    elif get("ssl.keystore.key") or get("ssl.keystore.certificate.chain"):
        inline_key, inline_chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
        if not inline_key or not inline_chain:
            raise InvalidConfigError(
                "ssl.keystore.key and ssl.keystore.certificate.chain go together"
            )
        key_pem = _private_key("ssl.keystore.key", inline_key.encode(), password)
        chain_pem = _pem(_certificates("ssl.keystore.certificate.chain", inline_chain.encode()))
    trust_pem = None
    trust_location = get("ssl.truststore.location")
    if trust_location:
        files.append(Path(trust_location))
        data = _read("ssl.truststore.location", trust_location)
        trust_pem = _pem(_certificates("ssl.truststore.location", data))
    elif get("ssl.truststore.certificates"):
        raw = get("ssl.truststore.certificates") or ""
        trust_pem = _pem(_certificates("ssl.truststore.certificates", raw.encode()))
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise InvalidConfigError(
            f"Invalid value {client_auth} for configuration ssl.client.auth: "
            f"String must be one of: {', '.join(CLIENT_AUTH)}"
        )
    if client_auth != "none" and trust_pem is None:
        raise InvalidConfigError(
            f"ssl.client.auth={client_auth} on listener {name} needs ssl.truststore.location "
            "(the certificate authorities that client certificates are checked against)"
        )
    low, high = _protocols(
        get("ssl.enabled.protocols") or DEFAULT_ENABLED_PROTOCOLS, "ssl.enabled.protocols"
    )
    return SslConfig(
        listener=name,
        key_pem=key_pem,
        chain_pem=chain_pem,
        trust_pem=trust_pem,
        client_auth=client_auth,
        min_version=low,
        max_version=high,
        ciphers=_ciphers(get("ssl.cipher.suites"), "ssl.cipher.suites"),
        files=tuple(files),
    )


class ReloadingSsl:
    """A listener's TLS material, loaded again when one of its files changes (a
    renewed certificate takes effect for new connections without a restart). A new
    file that does not load keeps the old material and is reported once per change."""

    def __init__(
        self,
        load: Callable[[], SslConfig],
        on_error: Callable[[str], None],
        check_interval_s: float = 1.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._load = load
        self._on_error = on_error
        self._clock = clock or plain_monotonic_s
        self._interval = check_interval_s
        self.config = load()
        self._stamps = self._stat()
        self._next_check = self._clock() + self._interval
        self.generation = 0  # bumped on each reload

    def _stat(self) -> tuple[tuple[int, int], ...]:
        out = []
        for path in self.config.files:
            try:
                st = path.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((-1, -1))
        return tuple(out)

    def check(self) -> bool:
        """Reload if a file changed since the last look (at most once per interval);
        True when the material is new."""
        now = self._clock()
        if now < self._next_check:
            return False
        self._next_check = now + self._interval
        stamps = self._stat()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        try:
            self.config = self._load()
        except (InvalidConfigError, ssl.SSLError, OSError) as e:
            self._on_error(str(e))
            return False
        self.generation += 1
        return True
