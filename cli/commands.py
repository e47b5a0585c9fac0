"""The `seglog` subcommands that are Kafka's tools (kafka-topics, kafka-console-producer,
...): each one's name, help and description, the function adding its own options and
the one it runs. One loop builds their parsers; the networked ones get the
connection options (arguments.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from . import (
    cluster,
    console,
    consumer_groups,
    leader_election,
    log_dirs,
    metadata_quorum,
    offsets,
    reassign_partitions,
    security,
    topics,
    transactions,
    web_console,
)
from .arguments import add_connection_args


@dataclass(frozen=True)
class Tool:
    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., int]
    help: str
    description: str
    connection: bool = True  # talks to a cluster: --bootstrap-server and the rest
    verbose: bool = True  # with it, --verbose (consumer-groups' own --verbose differs)

    def add_to(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        parser = sub.add_parser(self.name, help=self.help, description=self.description)
        if self.connection:
            add_connection_args(parser, verbose=self.verbose)
        self.add_arguments(parser)
        parser.set_defaults(func=self.run)


# In `seglog --help` order.
TOOLS = (
    Tool(
        "topics",
        topics.add_arguments,
        topics.run,
        help="create, list, describe, alter and delete topics (like kafka-topics)",
        description="Like kafka-topics: create, list, describe, alter and delete topics.",
    ),
    Tool(
        "produce",
        console.add_produce_arguments,
        console.run_produce,
        help="send lines from stdin as records (like kafka-console-producer)",
        description="Like kafka-console-producer: each stdin line becomes one record; "
        "pending records are flushed at end of input.",
    ),
    Tool(
        "consume",
        console.add_consume_arguments,
        console.run_consume,
        help="print records of a topic (like kafka-console-consumer)",
        description="Like kafka-console-consumer: print records, by default only new ones. "
        "Ends with 'Processed a total of N messages' on stderr.",
    ),
    Tool(
        "get-offsets",
        offsets.add_arguments,
        offsets.run,
        help="print partition offsets (earliest, latest, or by timestamp), like kafka-get-offsets",
        description="Like kafka-get-offsets: print topic:partition:offset for each partition.",
    ),
    Tool(
        "cluster",
        cluster.add_arguments,
        cluster.run,
        help="describe the cluster: nodes, the active controller and the Raft quorum",
        description="Describe the cluster: its nodes (fenced or not), the active controller "
        "with its Raft term, and each voter's role.",
    ),
    Tool(
        "log-dirs",
        log_dirs.add_arguments,
        log_dirs.run,
        help="describe log directories: partition sizes and the log cleaner's progress",
        description="Like kafka-log-dirs --describe, read from the directories themselves.",
        connection=False,
    ),
    Tool(
        "metadata-quorum",
        metadata_quorum.add_arguments,
        metadata_quorum.run,
        help="describe the controllers' Raft quorum (like kafka-metadata-quorum)",
        description="Like kafka-metadata-quorum: the quorum's leader, epoch, high "
        "watermark and each voter's replication, as the leader sees them.",
    ),
    Tool(
        "leader-election",
        leader_election.add_arguments,
        leader_election.run,
        help="elect preferred or unclean leaders (like kafka-leader-election)",
        description="Like kafka-leader-election: move leadership to the preferred replica, "
        "or give leaderless partitions a leader outside the ISR (unclean: may lose data).",
    ),
    Tool(
        "reassign-partitions",
        reassign_partitions.add_arguments,
        reassign_partitions.run,
        help="move partitions between brokers (like kafka-reassign-partitions)",
        description="Like kafka-reassign-partitions: generate a reassignment plan, execute "
        "it (the new replicas catch up, join the ISR, then the old ones leave), verify "
        "it, cancel it or list the running reassignments.",
    ),
    Tool(
        "consumer-groups",
        consumer_groups.add_arguments,
        consumer_groups.run,
        help="list, describe, reset offsets of and delete consumer groups "
        "(like kafka-consumer-groups)",
        description="Like kafka-consumer-groups: list, describe, reset offsets of, and "
        "delete consumer groups.",
        verbose=False,
    ),
    Tool(
        "configs",
        security.add_configs_arguments,
        security.run_configs,
        help="users' SCRAM credentials, topics' and brokers' dynamic configs (like kafka-configs)",
        description="Like kafka-configs for users (add, delete and describe SCRAM "
        "credentials), topics (describe and alter their configs) and brokers (describe "
        "and alter dynamic broker configs).",
    ),
    Tool(
        "acls",
        security.add_acls_arguments,
        security.run_acls,
        help="add, list and remove ACLs (like kafka-acls)",
        description="Like kafka-acls: add, list and remove ACL bindings.",
    ),
    Tool(
        "transactions",
        transactions.add_arguments,
        transactions.run,
        help="list, describe, find hanging and abort transactions (like kafka-transactions)",
        description="Like kafka-transactions: list and describe transactions, describe a "
        "partition's producers, find hanging transactions and abort one.",
    ),
    Tool(
        "console",
        web_console.add_arguments,
        web_console.run,
        help="serve the web console: nodes, topics, messages, consumer groups",
        description="A web UI over the cluster's own APIs (Admin, Consumer, Producer, the "
        "nodes' /metrics). Ctrl-C stops it.",
    ),
)
