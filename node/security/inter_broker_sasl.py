"""How a follower logs in to the leader's inter-broker Kafka listener when that listener
is SASL_PLAINTEXT or SASL_SSL (replica.fetch.protocol=kafka), with Kafka's settings:

- `sasl.mechanism.inter.broker.protocol`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's
  default, GSSAPI, is refused with a clear error: seglog has no Kerberos);
- the login's `username` and `password` from the mechanism's JAAS config on that
  listener, `listener.name.<listener>.<mechanism>.sasl.jaas.config`, else
  `sasl.jaas.config`, as Kafka reads them.

`InterBrokerLogin.steps()` is the client's side of the exchange without I/O: it yields
each token to send and receives the server's answer; the fetcher carries the tokens in
SaslAuthenticate requests. SCRAM is scramp's client (RFC 5802, with the server's
signature checked)."""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass

from scramp import ScramClient, ScramException

from seglog.storage.errors import InvalidConfigError

from .sasl import PLAIN, SUPPORTED

MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"
DEFAULT_MECHANISM = "GSSAPI"  # Kafka's default; refused below
_OPTION = re.compile(r'\b(username|password)\s*=\s*"([^"]*)"')

# Each token to send; the server's answer comes back in through send().
LoginSteps = Generator[bytes, bytes, None]


class InterBrokerLoginError(Exception):
    """The leader's answer broke the mechanism (a wrong SCRAM signature, say)."""


@dataclass(frozen=True)
class InterBrokerLogin:
    mechanism: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # never the password, in logs or errors
        return f"InterBrokerLogin({self.mechanism}, User:{self.username})"

    def steps(self) -> LoginSteps:
        if self.mechanism == PLAIN:
            yield f"\0{self.username}\0{self.password}".encode()
            return
        client = ScramClient([self.mechanism], self.username, self.password)
        try:
            server_first = yield client.get_client_first().encode()
            client.set_server_first(server_first.decode())
            server_final = yield client.get_client_final().encode()
            client.set_server_final(server_final.decode())
        except (ScramException, UnicodeDecodeError) as e:
            raise InterBrokerLoginError(f"{self.mechanism} exchange with the leader: {e}") from None


def inter_broker_login(
    props: Mapping[str, str], listener: str, protocol: str
) -> InterBrokerLogin | None:
    """The login a follower makes on `listener` (its security protocol `protocol`), or
    None when the listener does not take SASL. Raises InvalidConfigError naming the
    setting that is missing or wrong."""
    if not protocol.startswith("SASL_"):
        return None
    mechanism = props.get(MECHANISM_KEY, DEFAULT_MECHANISM).strip().upper()
    if mechanism not in SUPPORTED:
        raise InvalidConfigError(
            f"Invalid value {mechanism} for configuration {MECHANISM_KEY}: the "
            f"inter-broker listener {listener} is {protocol}, and seglog's followers log "
            f"in with {', '.join(SUPPORTED)}"
        )
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = props.get(key) or props.get("sasl.jaas.config") or ""
    options = dict(_OPTION.findall(jaas))
    if "username" not in options or "password" not in options:
        raise InvalidConfigError(
            f"Missing username or password in {key} (or sasl.jaas.config): the inter-broker "
            f"listener {listener} is {protocol}, so followers log in to it with "
            f'{mechanism} and need username="..." password="..." in its JAAS config'
        )
    return InterBrokerLogin(mechanism, options["username"], options["password"])
