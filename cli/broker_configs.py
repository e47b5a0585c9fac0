"""`seglog configs --entity-type brokers`, as kafka-configs for brokers (KIP-226):

    seglog configs --bootstrap-server H:P --describe --entity-type brokers \
        (--entity-name 1 | --entity-default) [--all]
    seglog configs --bootstrap-server H:P --alter --entity-type brokers \
        (--entity-name 1 | --entity-default) \
        [--add-config log.retention.ms=360000,leader.replication.throttled.rate=1048576] \
        [--delete-config log.retention.ms]

The dynamic broker configs (stored in the metadata log, applied without a restart)
are listed in docs/operations.md. Output as Kafka's:

    Dynamic configs for broker 1 are:
      log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000}
    Completed updating config for broker 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from .arguments import open_admin

SOURCES = {
    1: "DYNAMIC_BROKER_CONFIG",
    2: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}


def parse_add_config(text: str | None) -> dict[str, str]:
    """kafka-configs' --add-config: k=v pairs, comma-separated."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def print_entries(entries: Iterable[Any], sources: Mapping[int, str], out: TextIO) -> None:
    """kafka-configs' lines, by name: `  k=v sensitive=false synonyms={SOURCE:k=v}`."""
    for e in sorted(entries, key=lambda e: e.name):
        print(
            f"  {e.name}={e.value} sensitive={str(e.is_sensitive).lower()} "
            f"synonyms={{{sources.get(e.source, e.source)}:{e.name}={e.value}}}",
            file=out,
        )


def run(args: argparse.Namespace, out: TextIO) -> int:
    default = bool(getattr(args, "entity_default", False))
    if default == bool(args.entity_name):
        raise ValueError(
            "--entity-type brokers needs exactly one of --entity-name, --entity-default"
        )
    broker = "" if default else str(args.entity_name)
    if broker and not broker.isdigit():
        raise ValueError(f"--entity-name {broker!r} is not a broker id")
    what = "default config for brokers in the cluster" if default else f"config for broker {broker}"
    with open_admin(args) as admin:
        if args.describe:
            entries = admin.describe_broker_configs(broker)
            show_all = bool(getattr(args, "all", False))
            # Kafka's: the broker's own dynamic configs, unless --all; for the
            # default, the cluster-wide ones.
            shown = [e for e in entries.values() if show_all or default or e.source == 1]
            if default:
                print("Default configs for brokers in the cluster are:", file=out)
            else:
                title = "All" if show_all else "Dynamic"
                print(f"{title} configs for broker {broker} are:", file=out)
            print_entries(shown, SOURCES, out)
            return 0
        changes = parse_add_config(args.add_config)
        removed = [n.strip() for n in (args.delete_config or "").split(",") if n.strip()]
        admin.alter_broker_configs(broker, set=changes, delete=removed)
        print(f"Completed updating {what}.", file=out)
        return 0
