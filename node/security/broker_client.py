"""How a broker connects as a client to another broker's Kafka listener (a follower's
fetches, the transaction coordinator's WriteTxnMarkers): the listener's TLS material
when it is SSL or SASL_SSL (with ssl.endpoint.identification.algorithm), and the SASL
login (node/security/inter_broker_sasl.py) when it is SASL_PLAINTEXT or SASL_SSL."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from .inter_broker_sasl import InterBrokerLogin, inter_broker_login
from .ssl_config import load_ssl_config


def broker_client_security(
    props: Mapping[str, str], listener: str, protocol: str
) -> tuple[ssl.SSLContext | None, InterBrokerLogin | None]:
    """(TLS context, SASL login) for `listener`, whose security protocol is `protocol`.
    Raises InvalidConfigError naming a missing or wrong setting."""
    login = inter_broker_login(props, listener, protocol)
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        identify = props.get("ssl.endpoint.identification.algorithm", "https")
        context = load_ssl_config(props, listener).client_context(bool(identify.strip()))
    return context, login
