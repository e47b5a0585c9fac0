"""SASL for seglog's gRPC clients: a channel whose calls carry a session token. The
first call on the channel runs the Security service's SaslAuthenticate exchange
(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) with the user's password, and every call then
sends the token in its `seglog-sasl-token` metadata entry; the node makes the user the
call's principal (`User:<name>`) for its ACLs. A refused login raises Kafka's error
(SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...), naming the user and
mechanism. The password is only sent as is with PLAIN: use SSL with it.

Re-authentication, as KIP-368 does it for Kafka's clients: the node tells the token's
lifetime with it, and the client logs in again once a random 85-95% of it is spent,
before the call that would use it; a call the node still refuses with UNAUTHENTICATED
(the token expired anyway, or the user's credentials changed and voided it) makes the
client log in again and send that call once more, with the new token. One login at a
time per channel: threads that saw the same token refused wait for it and share its
outcome. If that login fails (the password was changed), the call raises
SASL_AUTHENTICATION_FAILED and is not sent again. A refused call never reached its
service (the node checks the token first), so sending it again cannot duplicate it."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc
from scramp import ScramClient, ScramException

from seglog.proto import security_pb2, security_pb2_grpc

from .errors import KafkaConfigurationError, KafkaError, error_class, for_code

TOKEN_METADATA = "seglog-sasl-token"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Log in again after this share of the token's life (KIP-368's client window), at a
# random point in it so that many clients do not log in at once.
REFRESH_WINDOW = (0.85, 0.95)
LOGIN_TIMEOUT_S = 30.0
SaslAuthenticationFailedError = error_class("SASL_AUTHENTICATION_FAILED")


def check_mechanism(mechanism: str) -> str:
    name = mechanism.strip().upper()
    if name not in SASL_MECHANISMS:
        raise KafkaConfigurationError(
            f"sasl_mechanism={mechanism}: seglog's clients speak {', '.join(SASL_MECHANISMS)}"
        )
    return name


def refused(outcome: Any) -> bool:
    """Did the node refuse the call's session token (expired, or voided)?"""
    code = getattr(outcome, "code", None)
    return callable(code) and code() == grpc.StatusCode.UNAUTHENTICATED


class SaslLogin:
    """One user's token for one node (a channel), renewed before its end and after
    the node refused it."""

    def __init__(
        self,
        channel: grpc.Channel,
        mechanism: str,
        user: str,
        password: str,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stub = security_pb2_grpc.SecurityStub(channel)
        self.mechanism = mechanism
        self.user = user
        self._password = password
        self._rand = rand
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._renew_at = 0.0
        self._failed: tuple[str, BaseException] | None = None  # (refused token, login error)
        self._after_refusal = False  # the token came from a login after a refusal
        self.logins = 0  # successful ones

    def token(self) -> str:
        """The token for the next call: a login first if there is none yet or its
        refresh point has passed."""
        with self._lock:
            if not self._token or self._clock() >= self._renew_at:
                self._renew(after_refusal=False)
            return self._token

    def renew(self, refused_token: str) -> str:
        """A new token after the node refused `refused_token`: one login for every
        thread that saw it refused (the first does it, the others wait and take its
        token, or its error)."""
        with self._lock:
            if self._failed is not None and self._failed[0] == refused_token:
                raise self._failed[1]
            if self._token not in ("", refused_token) and self._after_refusal:
                # Another thread logged in after a refusal, so after the node had
                # applied what voided the token. A token renewed early may predate
                # that: it is not taken.
                return self._token
            try:
                self._renew(after_refusal=True)
            except BaseException as e:
                self._failed = (refused_token, e)
                raise
            return self._token

    def _renew(self, after_refusal: bool) -> None:
        """Under the lock."""
        self._token = ""
        token, lifetime_ms = self._login()
        low, high = REFRESH_WINDOW
        share = low + (high - low) * self._rand()
        self._token = token
        self._renew_at = self._clock() + lifetime_ms / 1000 * share
        self._after_refusal = after_refusal
        self._failed = None
        self.logins += 1

    def _step(self, auth_bytes: bytes, session_id: str = "") -> Any:
        r = self._stub.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(
                mechanism=self.mechanism, auth_bytes=auth_bytes, session_id=session_id
            ),
            timeout=LOGIN_TIMEOUT_S,
        )
        if r.error_code != 0:
            reason = r.error_message or "login failed"
            raise for_code(r.error_code, f"{self.mechanism} login as User:{self.user}: {reason}")
        return r

    def _scram_login(self) -> Any:
        """SCRAM through scramp's client (RFC 5802: the node's signature is checked)."""
        try:
            scram = ScramClient([self.mechanism], self.user, self._password)
            first = self._step(scram.get_client_first().encode())
            scram.set_server_first(first.auth_bytes.decode())
            final = scram.get_client_final().encode()
        except (ScramException, UnicodeDecodeError) as e:
            raise KafkaError(f"SCRAM exchange with the node failed: {e}") from None
        r = self._step(final, first.session_id)
        try:
            scram.set_server_final(r.auth_bytes.decode())
        except (ScramException, UnicodeDecodeError) as e:  # not the node that holds our credential
            raise KafkaError(f"the node's SCRAM signature is wrong: {e}") from None
        return r

    def _login(self) -> tuple[str, int]:
        if self.mechanism == "PLAIN":
            r = self._step(f"\0{self.user}\0{self._password}".encode())
        else:
            r = self._scram_login()
        if not r.token:
            raise KafkaError("the node answered the SASL exchange without a session token")
        return r.token, r.session_lifetime_ms


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


def _with_token(d: Any, token: str, timeout: float | None) -> _Details:
    metadata = [*(m for m in d.metadata or () if m[0] != TOKEN_METADATA), (TOKEN_METADATA, token)]
    return _Details(
        d.method,
        timeout,
        metadata,
        d.credentials,
        getattr(d, "wait_for_ready", None),
        getattr(d, "compression", None),
    )


def _remaining(timeout: float | None, started: float) -> float | None:
    return None if timeout is None else timeout - (time.monotonic() - started)


class _TokenInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Every call carries the token; a unary call (all the clients make) whose token is
    refused is sent once more after a new login. Streams carry it only: their
    requests may already be consumed."""

    def __init__(self, login: SaslLogin) -> None:
        self._login = login

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        started = time.monotonic()
        token = self._login.token()
        outcome = continuation(_with_token(details, token, details.timeout), request)

        def again() -> Any:
            return self._again(continuation, details, request, token, started)

        if not outcome.done():  # `.future()`: the retry, if any, happens off this thread
            return _RetryingFuture(outcome, again)
        return again() if refused(outcome) else outcome

    def _again(
        self, continuation: Any, details: Any, request: Any, token: str, started: float
    ) -> Any:
        """The call sent once more with a new token (raises if the login fails)."""
        fresh = self._login.renew(token)
        timeout = _remaining(details.timeout, started)
        if timeout is not None and timeout <= 0:
            timeout = 0.001  # spent: let gRPC answer DEADLINE_EXCEEDED
        return continuation(_with_token(details, fresh, timeout), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_with_token(details, self._login.token(), details.timeout), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_with_token(details, self._login.token(), details.timeout), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_with_token(details, self._login.token(), details.timeout), requests)


class _RetryingFuture(grpc.Call, grpc.Future):
    """A `.future()` call that, if the node refuses its token, logs in again and sends
    the call once more on a thread of its own (a login is blocking calls, which would
    hold up gRPC's callback thread); it resolves with the call that decides."""

    def __init__(self, first: Any, again: Callable[[], Any]) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._current = first
        self._again = again
        self._error: BaseException | None = None  # the new login failed
        self._cancelled = False
        self._callbacks: list[Callable[[Any], None]] = []
        first.add_done_callback(self._first_done)

    def _first_done(self, first: Any) -> None:
        if not refused(first) or self._cancelled:
            self._finish()
            return
        threading.Thread(target=self._retry, name="seglog-sasl-login", daemon=True).start()

    def _retry(self) -> None:
        try:
            second = None if self._cancelled else self._again()
        except BaseException as e:  # noqa: BLE001 - raised by result()
            self._finish(e)
            return
        if second is None:
            return
        with self._lock:
            self._current = second
            cancel = self._cancelled
        if cancel:
            second.cancel()
        second.add_done_callback(lambda _f: self._finish())

    def _finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._error = error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    # grpc.Future
    def cancel(self) -> bool:
        with self._lock:
            if self._done.is_set():
                return False
            self._cancelled = True
            current = self._current
        if not current.cancel() and current.done():  # between the two calls: a login
            self._finish(grpc.FutureCancelledError())
        return True

    def cancelled(self) -> bool:
        if not self._done.is_set():
            return False
        return isinstance(self._error, grpc.FutureCancelledError) or (
            self._error is None and self._current.cancelled()
        )

    def running(self) -> bool:
        return not self._done.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def _wait(self, timeout: float | None) -> None:
        if not self._done.wait(timeout):
            raise grpc.FutureTimeoutError()

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._current.result()

    def exception(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        return self._error if self._error is not None else self._current.exception()

    def traceback(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._error is not None:
            return self._error.__traceback__
        return self._current.traceback()

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    # grpc.Call (the call that decides; the refused one while a login runs)
    def initial_metadata(self) -> Any:
        return self._current.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._current.trailing_metadata()

    def code(self) -> Any:
        return self._current.code()

    def details(self) -> Any:
        return self._current.details()

    def is_active(self) -> bool:
        return not self._done.is_set()

    def time_remaining(self) -> float | None:
        return self._current.time_remaining()

    def add_callback(self, callback: Callable[[], None]) -> bool:
        self.add_done_callback(lambda _f: callback())
        return True


def token_channel(channel: grpc.Channel, login: SaslLogin) -> grpc.Channel:
    """`channel` with every call carrying `login`'s token (renewed as above)."""
    return grpc.intercept_channel(channel, _TokenInterceptor(login))


def sasl_channel(channel: grpc.Channel, mechanism: str, user: str, password: str) -> grpc.Channel:
    """`channel` with every call carrying the user's session token."""
    return token_channel(channel, SaslLogin(channel, mechanism, user, password))
