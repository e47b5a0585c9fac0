"""Transactional throughput (issue 34): `python -m seglog.bench.transactions [--seconds S]
[--sizes 10,100,1000] [--producers 4] [--plot PATH]`.

Three nodes as `seglog local up` runs them (bench/cluster.py's start_local_up), a topic of
6 partitions (RF=3, min.insync.replicas=2) per phase, 1 KiB values (bench/kafka_protocol.py's
Values), confluent-kafka on the Kafka listeners, acks=all and idempotent in every phase:

* non-transactional: one producer as fast as its queue allows (linger.ms 5, batch.size
  64 KiB), the baseline;
* transactional, N records per transaction for each N of --sizes: one producer with a
  transactional.id repeating begin_transaction, N sends (partitioned by librdkafka's
  sticky partitioner), commit_transaction; records/s counts committed records only;
* at the middle size once more, --producers (4) transactional producers at once, each
  with its own transactional.id: one producer has one transaction open at a time, so
  this is how a Kafka user scales transactional throughput.

While the transactions at the middle size run, a sampler reads every partition's high
watermark (read_uncommitted) and last stable offset (read_committed ListOffsets) five
times a second: how far the LSO trails the HW in records, and in time (how long ago the
HW first reached the offset the LSO is at now).

Prints the figures, then one JSON line (the last line); --plot writes a PNG of records/s
per mode and the LSO's lag over time. --trace adds a phase at the middle size with
librdkafka's debug=eos,protocol (slower; not in the figures above): each request kind
per transaction with its round trips, and how often AddPartitionsToTxn was refused
CONCURRENT_TRANSACTIONS (each refusal costs librdkafka's 20 ms backoff). The target:
transactional throughput at 100 records per transaction at least 0.7x the
non-transactional one.
"""

from __future__ import annotations

import argparse
import bisect
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seglog.bench.measure import librdkafka_produce_until, percentile, say

RECORD_BYTES = 1024
PARTITIONS = 6
TARGET_RATIO_AT_100 = 0.7
SAMPLE_INTERVAL_S = 0.2


def produce_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 65536,
        "log_level": 3,
    }


def plain(ck: Any, bootstrap: str, topic: str, values: Any, seconds: float) -> dict[str, Any]:
    producer = ck.Producer(produce_config(bootstrap))
    acked = [0]
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            failed.append(err)

    producer.produce(topic, value=values.value(0), on_delivery=report)  # metadata, warm-up
    producer.flush(30)
    start = time.perf_counter()
    librdkafka_produce_until(
        producer,
        start + seconds,
        lambda i: producer.produce(topic, value=values.value(i), on_delivery=report),
        1,
        "non-transactional: messages left undelivered",
    )
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"non-transactional: {len(failed)} failed, e.g. {failed[0]}")
    records = acked[0] - 1
    return {"records_s": round(records / elapsed), "records": records, "seconds": elapsed}


def transactional(
    ck: Any,
    bootstrap: str,
    topic: str,
    values: Any,
    per_txn: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
    name: str = "",
) -> dict[str, Any]:
    producer = ck.Producer(
        {
            **produce_config(bootstrap),
            "transactional.id": f"bench-{topic}-{per_txn}{name}",
            **(extra or {}),
        }
    )
    producer.init_transactions(60)
    committed = transactions = 0
    commit_ms: list[float] = []
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        producer.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    producer.produce(topic, value=values.value(n))
                    break
                except BufferError:
                    producer.poll(0.01)
            n += 1
        t0 = time.perf_counter()
        producer.commit_transaction(60)  # flushes the sends, then EndTxn
        commit_ms.append((time.perf_counter() - t0) * 1000)
        producer.poll(0)  # serves the logger, if any
        committed += per_txn
        transactions += 1
    elapsed = time.perf_counter() - start
    return {
        "records_s": round(committed / elapsed),
        "records": committed,
        "transactions": transactions,
        "transactions_s": round(transactions / elapsed, 1),
        "commit_p50_ms": round(percentile(commit_ms, 50), 1),
        "commit_p99_ms": round(percentile(commit_ms, 99), 1),
        "commit_ms": commit_ms,
        "seconds": elapsed,
    }


def parallel(
    ck: Any, bootstrap: str, topic: str, values: Any, per_txn: int, seconds: float, n: int
) -> dict[str, Any]:
    """`n` transactional producers at once, each its own transactional.id and thread:
    how Kafka users scale transactions, since one producer has one open at a time."""
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results.append(
                transactional(ck, bootstrap, topic, values, per_txn, seconds, name=f"-p{i}")
            )
        except BaseException as e:  # noqa: BLE001 - reported below, after the join
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), name=f"txn-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} transactional producers failed") from errors[0]
    commit_ms = [ms for r in results for ms in r["commit_ms"]]
    transactions = sum(r["transactions"] for r in results)
    elapsed = max(r["seconds"] for r in results)
    return {
        "producers": n,
        "records_s": round(sum(r["records"] for r in results) / elapsed),
        "records": sum(r["records"] for r in results),
        "transactions": transactions,
        "transactions_s": round(transactions / elapsed, 1),
        "commit_p50_ms": round(percentile(commit_ms, 50), 1),
        "commit_p99_ms": round(percentile(commit_ms, 99), 1),
        "seconds": elapsed,
    }


RESPONSE = re.compile(r"Received (\w+)Response \(.*rtt ([\d.]+)ms\)")
REFUSED = "AddPartitionsToTxn response: partition"  # then the error: a refusal to retry


class RequestLog(logging.Handler):
    """librdkafka's debug lines (its `logger`): each response's kind and round trip,
    and the AddPartitionsToTxn refusals it retries after a backoff."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.rtt_ms: dict[str, list[float]] = {}
        self.refusals = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        found = RESPONSE.search(message)
        if found:
            self.rtt_ms.setdefault(found.group(1), []).append(float(found.group(2)))
        elif REFUSED in message and "concurrent" in message:
            self.refusals += 1


def trace(
    ck: Any, bootstrap: str, topic: str, values: Any, per_txn: int, seconds: float
) -> dict[str, Any]:
    """The transactional phase with librdkafka's debug=eos,protocol: per transaction,
    how many requests of each kind and their round trips, and the refusals."""
    handler = RequestLog()
    logger = logging.getLogger(f"seglog.bench.librdkafka.{topic}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    config = {"debug": "eos,protocol", "logger": logger, "log_level": 7}
    r = transactional(ck, bootstrap, topic, values, per_txn, seconds, config)
    del r["commit_ms"]
    n = max(1, r["transactions"])
    r["requests"] = {
        kind: {
            "per_txn": round(len(rtts) / n, 2),
            "rtt_p50_ms": round(percentile(rtts, 50), 1),
            "rtt_p99_ms": round(percentile(rtts, 99), 1),
        }
        for kind, rtts in sorted(handler.rtt_ms.items())
        if len(rtts) >= n // 2  # the per-transaction requests, not the start-up ones
    }
    r["concurrent_transactions_refusals_per_txn"] = round(handler.refusals / n, 2)
    return r


class LsoSampler:
    """Every partition's HW and LSO, SAMPLE_INTERVAL_S apart, on a thread of its own."""

    def __init__(self, ck: Any, bootstrap: str, topic: str) -> None:
        self.ck, self.topic = ck, topic
        self.probes = {
            level: ck.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"bench-lso-{level}",
                    "isolation.level": level,
                    "log_level": 3,
                }
            )
            for level in ("read_uncommitted", "read_committed")
        }
        self.samples: list[tuple[float, int, int, int]] = []  # (t, partition, hw, lso)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lso-sampler", daemon=True)

    def __enter__(self) -> LsoSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for probe in self.probes.values():
            probe.close()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            for p in range(PARTITIONS):
                tp = self.ck.TopicPartition(self.topic, p)
                try:
                    hw = self.probes["read_uncommitted"].get_watermark_offsets(tp, 5, False)[1]
                    lso = self.probes["read_committed"].get_watermark_offsets(tp, 5, False)[1]
                except self.ck.KafkaException:
                    continue
                self.samples.append((time.time(), p, hw, lso))

    def lag(self) -> dict[str, Any]:
        """HW - LSO in records, and how long before each LSO sample the HW had reached it."""
        records: list[float] = []
        behind_ms: list[float] = []
        hw_at: dict[int, tuple[list[int], list[float]]] = {}
        for t, p, hw, lso in self.samples:
            records.append(hw - lso)
            offsets, times = hw_at.setdefault(p, ([], []))
            if not offsets or hw > offsets[-1]:
                offsets.append(hw)
                times.append(t)
            i = bisect.bisect_left(offsets, lso)
            if i < len(offsets):
                behind_ms.append(max(0.0, (t - times[i]) * 1000))
        if not records:
            return {"samples": 0}
        return {
            "samples": len(records),
            "records_p50": percentile(records, 50),
            "records_p99": percentile(records, 99),
            "records_max": max(records),
            "ms_p50": round(percentile(behind_ms, 50), 1) if behind_ms else None,
            "ms_p99": round(percentile(behind_ms, 99), 1) if behind_ms else None,
            "ms_max": round(max(behind_ms), 1) if behind_ms else None,
        }


def plot(path: Path, result: dict[str, Any], samples: list[tuple[float, int, int, int]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, lag) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = ["non-transactional"] + [f"{n} / txn" for n in result["sizes"]]
    rates = [result["plain"]["records_s"]] + [
        result["transactional"][str(n)]["records_s"] for n in result["sizes"]
    ]
    colors = ["grey"] + ["tab:blue"] * len(result["sizes"])
    if "parallel" in result:
        q = result["parallel"]
        names.append(f"{result['lso_lag_size']} / txn,\n{q['producers']} producers")
        rates.append(q["records_s"])
        colors.append("tab:green")
    bars.bar(names, rates, color=colors)
    bars.axhline(
        TARGET_RATIO_AT_100 * result["plain"]["records_s"],
        color="tab:red",
        linestyle="--",
        label=f"{TARGET_RATIO_AT_100}x non-transactional",
    )
    bars.set_ylabel("records/s (1 KiB, acks=all, RF=3)")
    bars.set_title("confluent-kafka throughput")
    bars.legend()
    if samples:
        t0 = samples[0][0]
        for p in range(PARTITIONS):
            pts = [(t - t0, hw - lso) for t, q, hw, lso in samples if q == p]
            lag.plot([x for x, _ in pts], [y for _, y in pts], linewidth=0.8, label=f"p{p}")
        lag.legend(fontsize=7, ncol=3)
    lag.set_xlabel("s")
    lag.set_ylabel("HW - LSO (records)")
    lag.set_title(f"LSO behind HW, {result['lso_lag_size']} records per transaction")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase (10)")
    parser.add_argument("--sizes", default="10,100,1000", help="records per transaction")
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG here")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="add a phase at the middle size with librdkafka's protocol debug log",
    )
    parser.add_argument(
        "--producers",
        type=int,
        default=4,
        help="a phase at the middle size with this many transactional producers at once "
        "(4; 0: none)",
    )
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be a comma list of ints, got {args.sizes!r}")
    if not args.sizes or any(s < 1 for s in args.sizes):
        parser.error("--sizes needs at least one positive size")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    if args.producers < 0:
        parser.error("--producers must be 0 or more")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import confluent_kafka as ck

    from seglog.bench import cluster as bench_cluster
    from seglog.bench.kafka_protocol import Values

    args = parse_args(argv)
    values = Values(RECORD_BYTES, 42)
    root = Path(tempfile.mkdtemp(prefix="seglog-txn-bench-", dir=args.dir))
    load = {"before": [round(x, 2) for x in os.getloadavg()]}
    lag_size = args.sizes[len(args.sizes) // 2]
    result: dict[str, Any] = {"sizes": args.sizes, "lso_lag_size": lag_size, "transactional": {}}
    samples: list[tuple[float, int, int, int]] = []
    cluster, bootstrap = bench_cluster.start_local_up(root)
    try:
        topics = ["txn-bench-plain"] + [f"txn-bench-{n}" for n in args.sizes]
        topics += ["txn-bench-trace"] if args.trace else []
        topics += ["txn-bench-parallel"] if args.producers else []
        cluster.create_topics(topics, PARTITIONS)
        say(f"seglog up (Kafka {bootstrap}); confluent-kafka {ck.__version__} [data in {root}]")
        result["plain"] = plain(ck, bootstrap, "txn-bench-plain", values, args.seconds)
        say(f"non-transactional: {result['plain']['records_s']:,} records/s")
        for n in args.sizes:
            topic = f"txn-bench-{n}"
            if n == lag_size:
                with LsoSampler(ck, bootstrap, topic) as sampler:
                    r = transactional(ck, bootstrap, topic, values, n, args.seconds)
                samples = sampler.samples
                result["lso_lag"] = sampler.lag()
            else:
                r = transactional(ck, bootstrap, topic, values, n, args.seconds)
            r["ratio"] = round(r["records_s"] / max(1, result["plain"]["records_s"]), 2)
            del r["commit_ms"]
            result["transactional"][str(n)] = r
            say(
                f"transactional, {n} records/txn: {r['records_s']:,} records/s "
                f"({r['transactions_s']} txn/s, commit p50 {r['commit_p50_ms']} ms, "
                f"p99 {r['commit_p99_ms']} ms), {r['ratio']}x non-transactional"
            )
        if args.producers:
            q = parallel(
                ck, bootstrap, "txn-bench-parallel", values, lag_size, args.seconds,
                args.producers,
            )  # fmt: skip
            q["ratio"] = round(q["records_s"] / max(1, result["plain"]["records_s"]), 2)
            result["parallel"] = q
            say(
                f"{args.producers} transactional producers at once, {lag_size} records/txn: "
                f"{q['records_s']:,} records/s ({q['transactions_s']} txn/s, commit p50 "
                f"{q['commit_p50_ms']} ms, p99 {q['commit_p99_ms']} ms), "
                f"{q['ratio']}x non-transactional"
            )
        if args.trace:
            t = trace(ck, bootstrap, "txn-bench-trace", values, lag_size, args.seconds)
            result["trace"] = t
            say(
                f"traced, {lag_size} records/txn (debug log on): {t['records_s']:,} records/s, "
                f"commit p50 {t['commit_p50_ms']} ms, AddPartitionsToTxn refused "
                f"CONCURRENT_TRANSACTIONS {t['concurrent_transactions_refusals_per_txn']} "
                "times per transaction"
            )
            for kind, q in t["requests"].items():
                say(
                    f"  {kind}: {q['per_txn']} per transaction, round trip p50 "
                    f"{q['rtt_p50_ms']} ms, p99 {q['rtt_p99_ms']} ms"
                )
    finally:
        cluster.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    load["after"] = [round(x, 2) for x in os.getloadavg()]
    result["load"] = load
    lag = result.get("lso_lag", {})
    say(
        f"LSO behind HW at {lag_size} records/txn: p50 {lag.get('records_p50')} records "
        f"({lag.get('ms_p50')} ms), p99 {lag.get('records_p99')} records "
        f"({lag.get('ms_p99')} ms), max {lag.get('records_max')} ({lag.get('ms_max')} ms)"
    )
    at_100 = result["transactional"].get("100", {}).get("ratio")
    result["target_at_100"] = {
        "value": at_100,
        "target": f">= {TARGET_RATIO_AT_100}",
        "met": None if at_100 is None else at_100 >= TARGET_RATIO_AT_100,
    }
    say(f"target (100 records/txn >= {TARGET_RATIO_AT_100}x): {result['target_at_100']}")
    say(f"load average (1, 5, 15 min): before {load['before']}, after {load['after']}")
    if args.plot is not None:
        plot(args.plot, result, samples)
        say(f"picture: {args.plot}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
