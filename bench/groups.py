"""Consumer-group benchmark: three real node processes with Kafka listeners (the test
harness's cluster: RF=3 `__consumer_offsets`, acks=all appends), confluent-kafka
(librdkafka) consumers.

1. rebalance: a group of two Stable consumers (range assignor, heartbeat.interval.ms
   100, group.initial.rebalance.delay.ms 0 on the nodes so the figure is the
   coordinator's, not Kafka's 3 s wait); a third member subscribes; the time from its
   subscribe() until all three hold a share of the 12 partitions (the join phase, the
   leader's assignment, its replication, every SyncGroup answered). Median and p99
   over --rounds rounds, a new group each round.
2. commits: a consumer outside any group (assign(), generation -1) commits one
   partition's growing offset asynchronously, up to --in-flight commits pending, for
   --seconds; commits/s acknowledged (each one replicated to the in-sync replicas
   before its answer). Every acknowledgement is checked: no error, and the offsets
   fetched at the end are the last ones committed.

3. the same two figures with seglog's own Consumer over gRPC (its GroupCoordinator
   service; range assignor, heartbeat_interval_ms 100): the third member's join to a
   Stable group of three, and async commits/s outside a group.

The last stdout line is one JSON object with the figures.

    python bench/groups.py [--quick] [--rounds N] [--seconds S] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from seglog.bench.options import add_options, work_dir

ROOT = Path(__file__).resolve().parents[1]

PARTITIONS = 12
# seglog's Consumer keeps at most this many async commits pending and sends them one
# at a time, in order (concurrent gRPC calls may be served in any order, and a later
# commit must not be overtaken by an earlier one).
SEGLOG_MAX_IN_FLIGHT = 10
TOPIC = "bench-groups"


def say(text: str) -> None:
    print(text, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def consumer_config(bootstrap: str, group: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 100,
        "partition.assignment.strategy": "range",
    }


def rebalance_round(bootstrap: str, group: str, timeout_s: float = 60.0) -> float:
    from confluent_kafka import Consumer

    members = [Consumer(consumer_config(bootstrap, group)) for _ in range(2)]

    def shares() -> list[int]:
        return [len(m.assignment()) for m in members]

    try:
        for m in members:
            m.subscribe([TOPIC])
        deadline = time.monotonic() + timeout_s
        while sorted(shares()) != [6, 6]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the first two never settled: {shares()}")
            for m in members:
                m.poll(0.01)
        newcomer = Consumer(consumer_config(bootstrap, group))
        members.append(newcomer)
        started = time.monotonic()
        newcomer.subscribe([TOPIC])
        while sorted(shares()) != [4, 4, 4]:
            if time.monotonic() > started + timeout_s:
                raise RuntimeError(f"no Stable group of three: {shares()}")
            for m in members:
                m.poll(0.005)
        return time.monotonic() - started
    finally:
        for m in members:
            m.close()


class _Commits:
    """Asynchronous commits: how many are in flight, acknowledged and failed."""

    def __init__(self) -> None:
        self.pending = 0
        self.acked = 0
        self.errors: list[str] = []

    def done(self, error: object) -> None:
        self.pending -= 1
        if error is None:
            self.acked += 1
        else:
            self.errors.append(str(error))

    def run(
        self,
        seconds: float,
        in_flight: int,
        commit: Callable[[int], None],
        poll: Callable[[float], None],
    ) -> tuple[int, float]:
        """Commit offsets 1, 2, ... with at most `in_flight` unanswered for `seconds`,
        then wait for the answers: (the last offset committed, the seconds it took)."""
        offset = 0
        started = time.monotonic()
        end = started + seconds
        while time.monotonic() < end:
            if self.pending < in_flight:
                offset += 1
                self.pending += 1
                commit(offset)
            else:
                poll(0.001)
        while self.pending > 0 and time.monotonic() < end + 30:
            poll(0.01)
        return offset, time.monotonic() - started

    def result(self, client: str, last: int, committed: int, elapsed: float) -> dict[str, object]:
        if self.errors:
            raise RuntimeError(f"{client}: {len(self.errors)} commits failed: {self.errors[:3]}")
        if committed != last:
            raise RuntimeError(f"{client}: committed {committed} after the last commit of {last}")
        per_s = round(self.acked / elapsed, 1)
        return {"commits_per_s": per_s, "commits": self.acked, "last": last}


def commit_throughput(bootstrap: str, seconds: float, in_flight: int) -> dict[str, object]:
    from confluent_kafka import Consumer, TopicPartition

    commits = _Commits()
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-commits",
            "enable.auto.commit": False,
            "on_commit": lambda err, _partitions: commits.done(err),
        }
    )
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        # The first commit finds the coordinator; the timing starts after it.
        c.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
        last, elapsed = commits.run(
            seconds,
            in_flight,
            lambda offset: c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=True),
            c.poll,
        )
        committed = c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
    finally:
        c.close()
    return commits.result("librdkafka", last, committed, elapsed)


def seglog_consumer(bootstrap: str, group: str, **config: object) -> object:
    from seglog.client.consumer import Consumer

    return Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=100,
        partition_assignment_strategy="range",
        **config,
    )


def seglog_rebalance_round(bootstrap: str, group: str, timeout_s: float = 60.0) -> float:
    """As rebalance_round, with seglog's Consumer: the first two settle one after the
    other, then the time from the third's subscribe() to a Stable split of three."""
    members: list = []

    def shares() -> list[int]:
        return [len(m.assignment()) for m in members]

    def settle(wanted: list[int], since: float) -> None:
        while sorted(shares()) != wanted:
            if time.monotonic() > since + timeout_s:
                raise RuntimeError(f"seglog consumers never reached {wanted}: {shares()}")
            for m in members:
                m.poll(timeout_ms=5)

    try:
        for wanted in ([12], [6, 6]):
            member = seglog_consumer(bootstrap, group)
            members.append(member)
            member.subscribe([TOPIC])
            settle(wanted, time.monotonic())
        newcomer = seglog_consumer(bootstrap, group)
        members.append(newcomer)
        started = time.monotonic()
        newcomer.subscribe([TOPIC])
        settle([4, 4, 4], started)
        return time.monotonic() - started
    finally:
        for m in members:
            m.close()


def seglog_commit_throughput(bootstrap: str, seconds: float, in_flight: int) -> dict[str, object]:
    """As commit_throughput, with seglog's Consumer: commit_async outside a group, its
    callbacks run by poll() (the partition paused: nothing is fetched)."""
    from seglog.client.cluster import TopicPartition

    commits = _Commits()

    def on_commit(_offsets: object, outcome: object) -> None:
        commits.done(outcome if isinstance(outcome, Exception) else None)

    tp = TopicPartition(TOPIC, 0)
    c = seglog_consumer(bootstrap, "bench-seglog-commits")
    try:
        c.assign([tp])
        c.pause(tp)
        c.commit({tp: 0})  # finds the coordinator; the timing starts after it
        last, elapsed = commits.run(
            seconds,
            in_flight,
            lambda offset: c.commit_async({tp: offset}, callback=on_commit),
            lambda timeout_s: c.poll(timeout_ms=round(timeout_s * 1000)),
        )
        committed = c.committed(tp)
    finally:
        c.close()
    return commits.result("seglog", last, committed, elapsed)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--in-flight", type=int, default=50)
    add_options(parser, "--dir")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = min(args.rounds, 3)
        args.seconds = min(args.seconds, 2.0)
    return args


def _figures(rebalance_ms: list[float], commits: dict[str, object], in_flight: int) -> dict:
    """One client's figures: its rebalances to a Stable group of 3 and its commit rate."""
    return {
        "rebalance_to_stable_of_3_ms": {
            "median": round(statistics.median(rebalance_ms), 1),
            "p99": round(percentile(rebalance_ms, 0.99), 1),
            "rounds": len(rebalance_ms),
        },
        "commits_per_s": commits["commits_per_s"],
        "commits": commits["commits"],
        "in_flight": in_flight,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    from seglog.harness.kafka_cluster import KafkaCluster

    root = work_dir(args.dir, "seglog-groups-bench-")
    overrides = {"group.initial.rebalance.delay.ms": "0", "min.insync.replicas": "2"}
    cluster = KafkaCluster(root / "cluster", overrides)
    say(
        f"seglog consumer-group bench: 3 nodes, __consumer_offsets RF=3 acks=all, "
        f"confluent-kafka {ck.__version__} (librdkafka {ck.libversion()[0]}), "
        f"{os.cpu_count()} CPUs, {args.rounds} rebalance rounds, {args.seconds:g} s of commits"
    )
    try:
        cluster.start_all()
        bootstrap = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait("leaders", lambda: cluster.leader_of(TOPIC, PARTITIONS - 1))
        rebalance_round(bootstrap, "bench-warmup")
        times = []
        for i in range(args.rounds):
            times.append(rebalance_round(bootstrap, f"bench-rebalance-{i}"))
        ms = [t * 1000 for t in times]
        say(
            f"join -> Stable group of 3: median {statistics.median(ms):.0f} ms, "
            f"p99 {percentile(ms, 0.99):.0f} ms over {len(ms)} rounds"
        )
        commits = commit_throughput(bootstrap, args.seconds, args.in_flight)
        say(
            f"commits: {commits['commits_per_s']} acknowledged/s "
            f"({commits['commits']} in {args.seconds:g} s, {args.in_flight} in flight)"
        )
        seglog_rebalance_round(cluster.bootstrap, "bench-seglog-warmup")
        seglog_times = [
            seglog_rebalance_round(cluster.bootstrap, f"bench-seglog-rebalance-{i}") * 1000
            for i in range(args.rounds)
        ]
        say(
            f"seglog Consumer: join -> Stable group of 3: median "
            f"{statistics.median(seglog_times):.0f} ms, p99 {percentile(seglog_times, 0.99):.0f} ms"
        )
        seglog_in_flight = min(args.in_flight, SEGLOG_MAX_IN_FLIGHT)
        seglog_commits = seglog_commit_throughput(cluster.bootstrap, args.seconds, seglog_in_flight)
        say(
            f"seglog Consumer: commits: {seglog_commits['commits_per_s']} acknowledged/s "
            f"({seglog_in_flight} in flight)"
        )
        result = {
            "benchmark": "groups",
            "seglog_consumer": _figures(seglog_times, seglog_commits, seglog_in_flight),
            **_figures(ms, commits, args.in_flight),
            "quick": args.quick,
        }
    finally:
        cluster.stop_all()
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
