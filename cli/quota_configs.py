"""`seglog configs` for client quotas, as kafka-configs for users and clients:

    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --add-config request_percentage=50
    seglog configs --bootstrap-server H:P --alter --entity-type clients --entity-default \\
        --add-config producer_byte_rate=1048576
    seglog configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice]
    seglog configs --bootstrap-server H:P --alter --entity-type clients --entity-name app \\
        --delete-config producer_byte_rate

Entity types and names pair up in the order given (a name or --entity-default after
each --entity-type). Output as Kafka's ConfigCommand:

    Quota configs for user-principal 'alice', client-id 'app' are request_percentage=50.0
    Completed updating config for user alice.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .broker_configs import parse_add_config

ENTITY_TYPES = {"users": "user", "clients": "client-id"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def entities(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The (Kafka entity type, name or None for the default) pairs asked for; a type
    without a name pairs with None only on --describe (any name)."""
    types = list(args.entity_types)
    names = list(args.entity_names or [])
    if len(names) > len(types):
        raise ValueError("more --entity-name/--entity-default than --entity-type")
    if len(set(types)) != len(types):
        raise ValueError("each --entity-type may be given once")
    out: list[tuple[str, str | None]] = []
    for i, t in enumerate(types):
        if t not in ENTITY_TYPES:
            raise ValueError(f"--entity-type {t} does not take quotas with users or clients")
        out.append((ENTITY_TYPES[t], names[i] if i < len(names) else "*"))
    return out


def quota_ops(args: argparse.Namespace) -> list[tuple[str, float, bool]]:
    ops: list[tuple[str, float, bool]] = []
    for key, text in parse_add_config(args.add_config).items():
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"--add-config {key}={text}: a quota is a number") from None
        ops.append((key, value, False))
    for key in (k.strip() for k in (args.delete_config or "").split(",") if k.strip()):
        ops.append((key, 0.0, True))
    if not ops:
        raise ValueError("--alter needs --add-config and/or --delete-config")
    return ops


def describe_line(entity: Any, values: Any) -> str:
    """Kafka's `Quota configs for user-principal 'alice', client-id 'app' are k=v, ...`."""
    names = {p.entity_type: (p.entity_name if p.HasField("entity_name") else None) for p in entity}
    parts = []
    for kind, label in (("user", "user-principal"), ("client-id", "client-id")):
        if kind in names:
            name = names[kind]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    listed = ", ".join(f"{v.key}={v.value}" for v in values)
    return f"Quota configs for {', '.join(parts)} are {listed}"


def run(
    args: argparse.Namespace,
    stub: Any,
    timeout_s: float,
    out: TextIO,
    rpc: Callable[[Any, Any, float], Any],
    error_name: Callable[[int], str],
) -> int:
    """`rpc(method, request, timeout)` calls the Security service, `error_name` names
    an error code (cli/security.py's)."""
    from seglog.proto import security_pb2 as spb

    pairs = entities(args)
    if args.describe:
        components = []
        for kind, name in pairs:
            if name == "*":
                components.append(spb.QuotaFilterComponent(entity_type=kind, match_type=2))
            elif name is None:
                components.append(spb.QuotaFilterComponent(entity_type=kind, match_type=1))
            else:
                components.append(
                    spb.QuotaFilterComponent(entity_type=kind, match_type=0, match=name)
                )
        r = rpc(
            stub.DescribeClientQuotas,
            spb.DescribeClientQuotasRequest(components=components, strict=True),
            timeout_s,
        )
        if r.error_code:
            print(f"seglog configs: {error_name(r.error_code)}: {r.error_message}", file=sys.stderr)
            return 1
        for e in r.entries:
            print(describe_line(e.entity, e.values), file=out)
        return 0
    if any(name == "*" for _, name in pairs):
        raise ValueError("--alter needs --entity-name or --entity-default after each --entity-type")
    entity = []
    for kind, name in pairs:
        part = spb.QuotaEntityPart(entity_type=kind)
        if name is not None:
            part.entity_name = name
        entity.append(part)
    ops = [spb.QuotaOp(key=k, value=v, remove=rm) for k, v, rm in quota_ops(args)]
    r = rpc(
        stub.AlterClientQuotas,
        spb.AlterClientQuotasRequest(entries=[spb.QuotaAlteration(entity=entity, ops=ops)]),
        timeout_s,
    )
    for result in r.results:
        if result.error_code:
            print(
                f"seglog configs: {error_name(result.error_code)}: {result.error_message}",
                file=sys.stderr,
            )
            return 1
    kind, name = pairs[0]
    singular = {"user": "user", "client-id": "client"}[kind]
    if name is None:
        print(f"Completed updating default config for {singular}s in the cluster.", file=out)
    else:
        print(f"Completed updating config for {singular} {name}.", file=out)
    return 0
