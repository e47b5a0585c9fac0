"""`seglog reassign-partitions`, as kafka-reassign-partitions (KIP-455):

    seglog reassign-partitions --bootstrap-server H:P --generate
        --topics-to-move-json-file F --broker-list 2,3,4
    seglog reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file F
        [--additional] [--throttle BYTES_S]
    seglog reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file F
    seglog reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file F
    seglog reassign-partitions --bootstrap-server H:P --list

The files are Kafka's: topics to move {"version":1,"topics":[{"topic":"t"}]}; a
reassignment {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4],
"log_dirs":["any","any","any"]}]} (log_dirs other than "any" are refused: seglog
places a partition in a node's log dirs itself). --verify exits 1 when a partition
is not being reassigned and its replicas are not the target's; once every partition
is done it removes the throttles --throttle set (docs/operations.md).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, TextIO

from .arguments import add_actions, open_admin

VERSION = 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_actions(
        p,
        {
            "--generate": "propose a reassignment",
            "--execute": "start the reassignment",
            "--verify": "is the reassignment done?",
            "--cancel": "cancel the reassignment",
            "--list": "list the running reassignments",
        },
    )
    p.add_argument(
        "--topics-to-move-json-file",
        type=Path,
        metavar="FILE",
        help='(--generate) {"version":1,"topics":[{"topic":"t"}]}',
    )
    p.add_argument(
        "--broker-list",
        metavar="IDS",
        help="(--generate) the brokers to place the replicas on, e.g. 2,3,4",
    )
    p.add_argument(
        "--reassignment-json-file",
        type=Path,
        metavar="FILE",
        help='(--execute/--verify/--cancel) {"version":1,"partitions":[{"topic":"t",'
        '"partition":0,"replicas":[2,3,4]}]}',
    )
    p.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="BYTES_S",
        help="(--execute) throttle the moving replicas' replication to this many bytes/s; "
        "--verify removes the throttle once the reassignment is done",
    )
    p.add_argument(
        "--additional",
        action="store_true",
        help="(--execute) start even though other reassignments are running",
    )


def _read_json(path: Path | None, option: str) -> Any:
    if path is None:
        raise ValueError(f"{option} is required")
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read {option} {path}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{option} {path} is not JSON: {e}") from None


def parse_broker_list(text: str | None) -> list[int]:
    if not text:
        raise ValueError("--generate needs --broker-list (e.g. 1,2,3)")
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ValueError(f"--broker-list {text!r} is not a comma-separated list of ids") from None
    if not brokers or len(set(brokers)) != len(brokers):
        raise ValueError(f"--broker-list {text!r} must name distinct broker ids")
    return brokers


def parse_topics_to_move(doc: Any, path: Path) -> list[str]:
    try:
        names = [str(t["topic"]) for t in doc["topics"]]
    except (KeyError, TypeError) as e:
        raise ValueError(
            f'{path} is not a topics-to-move file ({{"version":1,"topics":[{{"topic":...}}]}}): '
            f"missing {e}"
        ) from None
    if not names:
        raise ValueError(f"{path} names no topic")
    return list(dict.fromkeys(names))


def parse_reassignment(doc: Any, path: Path) -> dict[tuple[str, int], tuple[int, ...]]:
    """Kafka's reassignment JSON → {(topic, partition): target replicas}."""
    try:
        entries = doc["partitions"]
        out: dict[tuple[str, int], tuple[int, ...]] = {}
        for e in entries:
            key = (str(e["topic"]), int(e["partition"]))
            replicas = tuple(int(r) for r in e["replicas"])
            dirs = e.get("log_dirs")
            if dirs is not None and any(d != "any" for d in dirs):
                raise ValueError(
                    f'{path}: {key[0]}-{key[1]} names log_dirs {dirs}; only "any" is '
                    f"supported (a node places partitions in its log dirs itself)"
                )
            if key in out:
                raise ValueError(f"{path} lists {key[0]}-{key[1]} twice")
            if not replicas:
                raise ValueError(f"{path}: {key[0]}-{key[1]} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise ValueError(f"{path}: {key[0]}-{key[1]} names a replica twice: {replicas}")
            out[key] = replicas
    except (KeyError, TypeError) as e:
        raise ValueError(
            f'{path} is not a reassignment file ({{"version":1,"partitions":[{{"topic":...,'
            f'"partition":...,"replicas":[...]}}]}}): missing or malformed {e}'
        ) from None
    if not out:
        raise ValueError(f"{path} lists no partition")
    return out


def assignment_json(assignment: dict[tuple[str, int], tuple[int, ...]]) -> str:
    """Kafka's format, one line, partitions sorted."""
    return json.dumps(
        {
            "version": VERSION,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": list(r),
                    "log_dirs": ["any"] * len(r),
                }
                for (t, p), r in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def propose(
    current: dict[tuple[str, int], tuple[int, ...]], brokers: list[int], rng: random.Random
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Each topic placed anew on `brokers` with its replication factor, as Kafka's
    --generate (its rack-unaware placement)."""
    from seglog.controller.cluster_control import assign_replicas

    by_topic: dict[str, list[int]] = {}
    for t, p in current:
        by_topic.setdefault(t, []).append(p)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for t, parts in sorted(by_topic.items()):
        rf = len(current[(t, parts[0])])
        if rf > len(brokers):
            raise ValueError(
                f"topic {t} has replication factor {rf}, more than the {len(brokers)} "
                f"brokers in --broker-list"
            )
        placed = assign_replicas(brokers, max(parts) + 1, rf, rng)
        for p in parts:
            out[(t, p)] = placed[p]
    return out


def _current(admin: Any, names: list[str]) -> dict[tuple[str, int], tuple[int, ...]]:
    return {
        (d.name, p.partition): p.replicas
        for d in admin.describe_topics(sorted(set(names)))
        for p in d.partitions
    }


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.client.cluster import TopicPartition

    out = out or sys.stdout
    with open_admin(args) as admin:
        if args.list:
            running = admin.list_partition_reassignments()
            if not running:
                print("No partition reassignments found.", file=out)
            else:
                print("Current partition reassignments:", file=out)
                for tp, r in sorted(running.items(), key=lambda kv: _key(kv[0])):
                    print(
                        f"{tp.topic}-{tp.partition}: replicas: "
                        f"{','.join(map(str, r.replicas))}. adding: "
                        f"{','.join(map(str, r.adding_replicas))}. removing: "
                        f"{','.join(map(str, r.removing_replicas))}.",
                        file=out,
                    )
            return 0
        if args.generate:
            path = args.topics_to_move_json_file
            names = parse_topics_to_move(_read_json(path, "--topics-to-move-json-file"), path)
            brokers = parse_broker_list(args.broker_list)
            current = _current(admin, names)
            proposed = propose(current, brokers, random.Random())
            print("Current partition replica assignment", file=out)
            print(assignment_json(current), file=out)
            print("", file=out)
            print("Proposed partition reassignment configuration", file=out)
            print(assignment_json(proposed), file=out)
            return 0
        path = args.reassignment_json_file
        wanted = parse_reassignment(_read_json(path, "--reassignment-json-file"), path)
        tps = [TopicPartition(t, p) for t, p in sorted(wanted)]
        if args.verify:
            return _verify(admin, wanted, tps, out)
        if args.cancel:
            results = admin.alter_partition_reassignments({tp: None for tp in tps})
            return _report(results, "cancelled", out, ok_also=("NO_REASSIGNMENT_IN_PROGRESS",))
        current = _current(admin, [t for t, _ in wanted])
        missing = sorted(k for k in wanted if k not in current)
        if missing:
            raise ValueError("no such partition(s): " + ", ".join(f"{t}-{p}" for t, p in missing))
        if not args.additional and admin.list_partition_reassignments():
            raise ValueError(
                "Cannot execute because there is an existing partition assignment. Use "
                "--additional to override this and create a new partition assignment in "
                "addition to the existing one."
            )
        print("Current partition replica assignment", file=out)
        print("", file=out)
        print(assignment_json({k: current[k] for k in wanted}), file=out)
        print("", file=out)
        print("Save this to use as the --reassignment-json-file option during rollback", file=out)
        if args.throttle != -1:
            if args.throttle < 1:
                raise ValueError(f"--throttle {args.throttle}: a rate must be at least 1 byte/s")
            _set_throttles(admin, current, wanted, args.throttle, out)
        results = admin.alter_partition_reassignments(
            {TopicPartition(t, p): list(r) for (t, p), r in wanted.items()}
        )
        return _report(results, "started", out)


THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def _set_throttles(
    admin: Any,
    current: dict[tuple[str, int], tuple[int, ...]],
    wanted: dict[tuple[str, int], tuple[int, ...]],
    rate: int,
    out: TextIO,
) -> None:
    """As Kafka's tool: the current replicas throttled on the leader side, the new
    ones on the follower side, and the rate on every broker involved."""
    by_topic: dict[str, tuple[list[str], list[str]]] = {}
    brokers: set[int] = set()
    for (t, p), target in sorted(wanted.items()):
        leaders, followers = by_topic.setdefault(t, ([], []))
        leaders += [f"{p}:{b}" for b in current[(t, p)]]
        followers += [f"{p}:{b}" for b in target if b not in current[(t, p)]]
        brokers |= set(current[(t, p)]) | set(target)
    for t, (leaders, followers) in by_topic.items():
        admin.alter_configs(
            t,
            set={
                THROTTLED_REPLICAS[0]: ",".join(leaders),
                THROTTLED_REPLICAS[1]: ",".join(followers),
            },
        )
    for b in sorted(brokers):
        admin.alter_broker_configs(str(b), set=dict.fromkeys(THROTTLE_RATES, str(rate)))
    print(
        f"The inter-broker throttle limit was set to {rate} B/s\n"
        "Warning: You must run --verify periodically, until the reassignment completes, "
        "to ensure the throttle is removed.",
        file=out,
    )


def _clear_throttles(admin: Any, topics: set[str], out: TextIO) -> None:
    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers)
    for b in brokers:
        admin.alter_broker_configs(str(b), delete=THROTTLE_RATES)
    print("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)), file=out)
    for t in sorted(topics):
        admin.alter_configs(t, delete=THROTTLED_REPLICAS)
        print(f"Clearing topic-level throttles on topic {t}", file=out)


def _key(tp: Any) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def _report(
    results: dict[Any, tuple[str, str]], verb: str, out: TextIO, ok_also: tuple[str, ...] = ()
) -> int:
    done = sorted((tp for tp, (e, _) in results.items() if e == "NONE" or e in ok_also), key=_key)
    failed = sorted(
        ((tp, e, m) for tp, (e, m) in results.items() if tp not in done), key=lambda x: _key(x[0])
    )
    if done:
        print(
            f"Successfully {verb} partition reassignment(s) for "
            + ",".join(f"{tp.topic}-{tp.partition}" for tp in done),
            file=out,
        )
    for tp, error, message in failed:
        print(
            f"Error reassigning partition {tp.topic}-{tp.partition}: {error}: {message}", file=out
        )
    if failed:
        raise ValueError(f"{len(failed)} partition reassignment(s) failed")
    return 0


def _verify(
    admin: Any,
    wanted: dict[tuple[str, int], tuple[int, ...]],
    tps: list[Any],
    out: TextIO,
) -> int:
    running = admin.list_partition_reassignments(tps)
    current = _current(admin, [t for t, _ in wanted])
    print("Status of partition reassignment:", file=out)
    mismatched = 0
    for tp in tps:
        key = (tp.topic, tp.partition)
        name = f"{tp.topic}-{tp.partition}"
        if tp in running:
            print(f"Reassignment of partition {name} is still in progress.", file=out)
        elif current.get(key) == wanted[key]:
            print(f"Reassignment of partition {name} is completed.", file=out)
        else:
            mismatched += 1
            have = ",".join(map(str, current.get(key, ())))
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{have} rather than {','.join(map(str, wanted[key]))}.",
                file=out,
            )
    if mismatched:
        raise ValueError(f"{mismatched} partition(s) are not on their target replicas")
    if not any(tp in running for tp in tps):
        # All done: no throttle may stay behind (Kafka's --verify does the same).
        _clear_throttles(admin, {t for t, _ in wanted}, out)
    return 0
