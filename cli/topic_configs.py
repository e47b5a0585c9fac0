"""`seglog configs --entity-type topics`, as kafka-configs for topics:

    seglog configs --bootstrap-server H:P --describe --entity-type topics [--entity-name T] [--all]
    seglog configs --bootstrap-server H:P --alter --entity-type topics --entity-name T \\
        [--add-config retention.ms=86400000,cleanup.policy=compact] [--delete-config retention.ms]

Output as Kafka's:

    Dynamic configs for topic demo are:
      retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}
    Completed updating config for topic demo.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from .arguments import open_admin
from .broker_configs import parse_add_config, print_entries

# Kafka's DescribeConfigs ConfigSource ids.
SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}


def run(args: argparse.Namespace, out: TextIO) -> int:
    if getattr(args, "entity_default", False):
        raise ValueError("--entity-default is for brokers, not topics")
    name = args.entity_name
    with open_admin(args) as admin:
        if args.describe:
            if args.add_config or args.delete_config:
                raise ValueError("--add-config and --delete-config go with --alter")
            show_all = bool(getattr(args, "all", False))
            for topic in [name] if name else admin.list_topics():
                entries = admin.describe_configs(topic)
                shown = [e for e in entries.values() if show_all or not e.is_default]
                title = "All" if show_all else "Dynamic"
                print(f"{title} configs for topic {topic} are:", file=out)
                print_entries(shown, SOURCES, out)
            return 0
        if not name:
            raise ValueError("--alter --entity-type topics needs --entity-name")
        changes = parse_add_config(args.add_config)
        removed = [n.strip() for n in (args.delete_config or "").split(",") if n.strip()]
        if not changes and not removed:
            raise ValueError("--alter needs --add-config and/or --delete-config")
        admin.alter_configs(name, set=changes, delete=removed)
        print(f"Completed updating config for topic {name}.", file=out)
        return 0
