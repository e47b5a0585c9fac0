"""A broker's SASL login to another broker's Kafka listener, as Kafka's requests without
I/O: SaslHandshake (v1) names the mechanism, then SaslAuthenticate (v2, KIP-152) carries
each token of the login (node/security/inter_broker_sasl.py). `sasl_exchange` yields each
request to send and takes its decoded answer back; the follower's fetcher drives it on the
node's loop, the transaction coordinator's marker sender on a blocking socket. A refusal
raises InterBrokerLoginError naming the peer, the mechanism and Kafka's error."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from ..security.inter_broker_sasl import InterBrokerLogin, InterBrokerLoginError
from .errors import error_name

SASL_HANDSHAKE_VERSION = 1  # then SaslAuthenticate frames (KIP-152)
SASL_AUTHENTICATE_VERSION = 2


@dataclass(frozen=True)
class SaslRequest:
    """One request of the exchange: what to send, how to read its answer (`flexible`:
    the answer has response header v1)."""

    request: Any
    response_class: Any
    version: int
    flexible: bool


# Each request to send; its decoded answer comes back in through send().
SaslExchange = Generator[SaslRequest, Any, None]


def sasl_exchange(login: InterBrokerLogin, peer: str) -> SaslExchange:
    """The exchange with `peer` (named in errors, e.g. "node 2")."""
    v = SASL_HANDSHAKE_VERSION
    shake = yield SaslRequest(
        SaslHandshakeRequest(version=v, mechanism=login.mechanism), SaslHandshakeResponse, v, False
    )
    if shake.error_code != 0:
        raise InterBrokerLoginError(
            f"{peer} refused SASL mechanism {login.mechanism} "
            f"({error_name(shake.error_code)}; it offers {', '.join(shake.mechanisms)})"
        )
    steps = login.steps()
    token = next(steps)
    # Bounded by the mechanism's steps (PLAIN one, SCRAM two).
    while True:
        v = SASL_AUTHENTICATE_VERSION
        answer = yield SaslRequest(
            SaslAuthenticateRequest(version=v, auth_bytes=token), SaslAuthenticateResponse, v, True
        )
        if answer.error_code != 0:
            raise InterBrokerLoginError(
                f"{peer} refused the login of {login!r}: "
                f"{error_name(answer.error_code)} {answer.error_message or ''}".rstrip()
            )
        try:
            token = steps.send(answer.auth_bytes)
        except StopIteration:
            return
