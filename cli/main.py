"""The `seglog` command: one entry point, a subcommand per tool (as Kafka ships
kafka-dump-log, kafka-topics, ... as separate scripts)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# Only the parsers here: every subcommand imports what it runs when it runs, so that
# `seglog --help` and a typo answer at once.
from seglog.harness.ports import layout_help

from .commands import TOOLS


def _dump_log(args: argparse.Namespace) -> int:
    from seglog.storage.dump_log import DumpOptions, dump_files

    decoder = None
    if args.offsets_decoder:
        from seglog.node.groups.offsets_records import describe_record

        decoder = describe_record
    options = DumpOptions(
        print_data_log=args.print_data_log or args.offsets_decoder,
        deep_iteration=args.deep_iteration or args.print_data_log or args.offsets_decoder,
        record_decoder=decoder,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes,
    )
    return dump_files([Path(f) for f in args.files], options, sys.stdout)


def _demo(args: argparse.Namespace) -> int:
    from seglog.node.demo import run_demo

    return run_demo(Path(args.data_dir), records=args.records, out=sys.stdout)


def _node(args: argparse.Namespace) -> int:
    from seglog.node.config import NodeConfig
    from seglog.node.server import run_node

    config = NodeConfig.load(Path(args.config), args.override or [])
    return run_node(config, args.log_level)


def _local(args: argparse.Namespace) -> int:
    from seglog.harness import local_cluster

    if args.action == "up":
        return local_cluster.up(
            Path(args.data_dir),
            args.nodes,
            args.base_port,
            args.detach,
            sys.stdout,
            console=not args.no_console,
        )
    if args.action == "status":
        return local_cluster.status(Path(args.data_dir), sys.stdout)
    return local_cluster.down(Path(args.data_dir), sys.stdout)


class _Version(argparse.Action):
    """`--version`, read from the installed package's metadata only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print seglog's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from seglog import __version__

        print(f"seglog {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seglog", description="A replicated commit log with Kafka's on-disk format."
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dump = sub.add_parser(
        "dump-log",
        help="decode .log, .index, .timeindex, .snapshot and checkpoint files",
        description="Like kafka-dump-log: decode segment, index, snapshot and checkpoint files.",
    )
    dump.add_argument("--files", nargs="+", required=True, metavar="FILE")
    dump.add_argument("--print-data-log", action="store_true", help="print each record")
    dump.add_argument(
        "--deep-iteration", action="store_true", help="decode every record of every batch"
    )
    dump.add_argument(
        "--verify-index-only", action="store_true", help="check indexes against the log only"
    )
    dump.add_argument(
        "--index-sanity-check", action="store_true", help="only run the index sanity checks"
    )
    dump.add_argument(
        "--max-bytes", type=int, default=2**31 - 1, help="stop reading a .log after this many bytes"
    )
    dump.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode __consumer_offsets records (implies --print-data-log)",
    )
    dump.set_defaults(func=_dump_log)

    node = sub.add_parser(
        "node",
        help="run a node (broker and controller) from a server.properties file",
        description="Run a seglog node. SIGTERM or Ctrl-C shuts it down cleanly.",
    )
    node.add_argument("--config", required=True, help="server.properties with Kafka's names")
    node.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="override one setting"
    )
    node.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    node.set_defaults(func=_node)

    demo = sub.add_parser(
        "demo",
        help="write a demo partition log (several segments, codecs, an idempotent producer) "
        "and dump it",
    )
    demo.add_argument("--data-dir", default="data/demo", help="log directory to write into")
    demo.add_argument("--records", type=int, default=20_000)
    demo.set_defaults(func=_demo)

    local = sub.add_parser(
        "local",
        help="run a cluster of node processes on this machine",
        description="'seglog local up' starts N nodes (each a broker and a Raft controller "
        "voter), waits until every one serves and prints the bootstrap servers, or stops "
        "them and prints each failed node's error; Ctrl-C (or 'seglog local down' from "
        "another terminal) stops them cleanly. 'status' shows each node's pid, health and "
        "ports. The data stays in --data-dir after 'down' (delete it with rm -r).",
        epilog=layout_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    local.add_argument(
        "action",
        choices=["up", "status", "down"],
        help="up: start (foreground unless --detach); status: show; down: stop",
    )
    local.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    local.add_argument(
        "--data-dir",
        default="data/local",
        help="the cluster's data and logs, node-N/ each (default %(default)s, relative to "
        "the current directory)",
    )
    local.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="the first Kafka-protocol port; every other port is laid out from it, see "
        "below (default %(default)s)",
    )
    local.add_argument(
        "--detach",
        action="store_true",
        help="return once every node serves, leaving the cluster running",
    )
    local.add_argument(
        "--no-console",
        action="store_true",
        help="do not start the web console (seglog console, on --base-port + 400)",
    )
    local.set_defaults(func=_local)

    for tool in TOOLS:
        tool.add_to(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # The subcommand's own usage, not the top-level one, for a mistyped flag.
        sub = _subparser(parser, args.command)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "verbose", False) and args.command != "consumer-groups":
        import logging

        logging.basicConfig(level=logging.INFO, format="seglog: %(name)s: %(message)s")
    from seglog.client.errors import KafkaError
    from seglog.harness.local_cluster import LocalClusterError
    from seglog.storage.errors import StorageError

    try:
        code = int(args.func(args))
        sys.stdout.flush()
        return code
    except StorageError as e:
        print(f"seglog {args.command}: {e.error_name}: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:
        # str() is "ERROR_NAME: the node's message".
        print(f"seglog {args.command}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _stdout_closed()
    except (OSError, ValueError, LocalClusterError) as e:
        print(f"seglog {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            chosen: argparse.ArgumentParser = action.choices[command]
            return chosen
    return parser


def _stdout_closed() -> int:
    """The reader of our stdout went away (`seglog dump-log ... | head`): stop quietly,
    as a Unix tool killed by SIGPIPE does (status 128+13), and keep Python from
    reporting the pipe again when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
