"""The floor under every seglog request: what one gRPC exchange costs in Python.

A trivial service in a child process echoes 1 KiB messages; this process calls it
one exchange at a time (round trips, not throughput), back to back or paced at --rate
a second (the cost at a control plane's idle rates, where each exchange also wakes
sleeping threads). Five shapes, alternated over --rounds so that the machine's drift
spreads over all of them:

- unary-sync: a unary call to a `grpc.server` with a thread pool (how the node serves
  Produce and Fetch, and how followers and clients call it);
- unary-aio: the same call to a `grpc.aio.server` with an `async def` handler;
- stream-sync: one message each way on a long-lived bidirectional stream, sync server;
- stream-aio: the same stream, aio server;
- oneway-sync: one message one way on a long-lived client stream, nothing back per
  message (how a voter sends Raft messages to a peer: node/controller/raft_transport.py;
  unary-sync is how it sent them before, a call each). The server counts what arrived,
  and the figures are read once the stream has ended and every message was counted.

Per shape: exchanges/s, the server's and this process's CPU per exchange (user+sys
from /proc), and the server's context switches per exchange (every thread's
voluntary and involuntary switches). The last stdout line is JSON.

    python bench/grpc_floor.py [--quick] [--exchanges N] [--rounds R] [--rate R]
                               [--shapes a,b] [--plot out.png]

GRPC_EXPERIMENTS in the environment reaches both processes (gRPC's own switches for
its I/O engine), so the same command compares them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from seglog.bench.options import add_options, known_names, quick_or_full, save_plot

SHAPES = ("unary-sync", "unary-aio", "stream-sync", "stream-aio", "oneway-sync")
SERVICE = "floor.Echo"
PAYLOAD = b"\xa5" * 1024
WARM_UP = 300


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _same(message: bytes) -> bytes:
    return message


# --- the echo server (child process) -------------------------------------------------------


def _handlers(aio: bool) -> grpc.GenericRpcHandler:
    def unary(request: bytes, _context: Any) -> bytes:
        return request

    async def unary_async(request: bytes, _context: Any) -> bytes:
        return request

    def stream(requests: Iterator[bytes], _context: Any) -> Iterator[bytes]:
        yield from requests

    async def stream_async(requests: Any, _context: Any) -> Any:
        async for message in requests:
            yield message

    def sink(requests: Iterator[bytes], _context: Any) -> bytes:
        return str(sum(1 for _ in requests)).encode()

    async def sink_async(requests: Any, _context: Any) -> bytes:
        return str(len([m async for m in requests])).encode()

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(
                unary_async if aio else unary, _same, _same
            ),
            "Stream": grpc.stream_stream_rpc_method_handler(
                stream_async if aio else stream, _same, _same
            ),
            "Sink": grpc.stream_unary_rpc_method_handler(sink_async if aio else sink, _same, _same),
        },
    )


def serve(aio: bool) -> None:
    """Print the port, then serve until killed."""
    if not aio:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        server.add_generic_rpc_handlers([_handlers(False)])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        print(port, flush=True)
        server.wait_for_termination()
        return

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([_handlers(True)])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


# --- measuring (this process) ----------------------------------------------------------------


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:
            continue  # the thread ended between listing and reading
        for line in status.splitlines():
            if "ctxt_switches:" in line:  # voluntary and nonvoluntary
                total += int(line.split()[1])
    return total


class Server:
    def __init__(self, aio: bool) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "aio" if aio else "sync"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the echo server did not start (printed {line!r})")
        self.port = int(line)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def exchange_fn(
    channel: grpc.Channel, shape: str
) -> tuple[Callable[[], bytes], Callable[[], int | None]]:
    """One exchange (a call, or a stream message: one way for oneway-sync) and a
    closer, which answers how many one-way messages arrived (None for the others)."""
    if shape.startswith("unary"):
        unary = channel.unary_unary(f"/{SERVICE}/Unary")
        return (lambda: unary(PAYLOAD, timeout=30)), (lambda: None)
    outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def requests() -> Iterator[bytes]:
        while (message := outbox.get()) is not None:
            yield message

    if shape.startswith("oneway"):
        counted = channel.stream_unary(f"/{SERVICE}/Sink").future(requests())

        def send() -> bytes:
            outbox.put(PAYLOAD)
            return PAYLOAD

        def arrived() -> int:
            outbox.put(None)
            return int(counted.result(timeout=60))

        return send, arrived
    responses = channel.stream_stream(f"/{SERVICE}/Stream")(requests())

    def one() -> bytes:
        outbox.put(PAYLOAD)
        return next(responses)  # type: ignore[no-any-return]

    def close() -> None:
        outbox.put(None)
        responses.cancel()

    return one, close


def measure(shape: str, exchanges: int, rate: float = 0.0) -> dict[str, float]:
    """`rate`: exchanges a second (0: back to back)."""
    server = Server(aio=shape.endswith("aio"))
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        one, close = exchange_fn(channel, shape)
        for _ in range(WARM_UP):
            if one() != PAYLOAD:
                raise RuntimeError(f"{shape}: the echo differs from what was sent")
        if rate:
            time.sleep(1.0)  # the warm-up's traffic is over: the threads go back to sleep
        me, pid = os.getpid(), server.proc.pid
        server_cpu, client_cpu, switches = cpu_s(pid), cpu_s(me), context_switches(pid)
        start = time.perf_counter()
        for i in range(exchanges):
            if rate:
                time.sleep(max(0.0, start + i / rate - time.perf_counter()))
            one()
        # A one-way stream's messages may still be on their way: read after they all are.
        arrived = close()
        if arrived is not None and arrived != WARM_UP + exchanges:
            raise RuntimeError(f"{shape}: {arrived} of {WARM_UP + exchanges} messages arrived")
        elapsed = time.perf_counter() - start
        return {
            "exchanges_s": round(exchanges / elapsed),
            "server_cpu_us": round((cpu_s(pid) - server_cpu) / exchanges * 1e6, 1),
            "client_cpu_us": round((cpu_s(me) - client_cpu) / exchanges * 1e6, 1),
            "server_switches": round((context_switches(pid) - switches) / exchanges, 2),
        }
    finally:
        channel.close()
        server.stop()


def summarise(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}


def plot(path: Path, figures: dict[str, dict[str, float]], rate: float = 0.0) -> None:
    """Server and client CPU per exchange, by shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(figures)
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(shapes))
    server = [figures[s]["server_cpu_us"] for s in shapes]
    client = [figures[s]["client_cpu_us"] for s in shapes]
    ax.bar([x - 0.2 for x in xs], server, width=0.4, label="server CPU per exchange")
    ax.bar([x + 0.2 for x in xs], client, width=0.4, label="caller CPU per exchange")
    for x, s in zip(xs, shapes, strict=True):
        ax.annotate(
            f"{figures[s]['server_switches']:.1f} switches",
            (x - 0.2, server[x]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(list(xs), shapes)
    ax.set_ylabel("µs of CPU (user+sys), median of rounds")
    paced = f", {rate:g} a second" if rate else ", back to back"
    ax.set_title(f"one 1 KiB gRPC exchange in Python (grpcio {grpc.__version__}{paced})")
    ax.legend(fontsize=8)
    save_plot(fig, path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=None, help="per shape per round (4000)")
    parser.add_argument("--rounds", type=int, default=None, help="alternations (3)")
    parser.add_argument(
        "--shapes", default=",".join(SHAPES), help="comma list of " + ",".join(SHAPES)
    )
    parser.add_argument(
        "--rate", type=float, default=0.0, help="exchanges a second (default 0: back to back)"
    )
    parser.add_argument("--quick", action="store_true", help="few exchanges, for a smoke run")
    add_options(parser, "--plot")
    parser.add_argument("--serve", choices=("sync", "aio"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick_or_full(args, exchanges=(300, 4000), rounds=(1, 3))
    args.shapes = known_names(parser, "--shapes", args.shapes, SHAPES)
    if args.exchanges < 1 or args.rounds < 1:
        parser.error("--exchanges and --rounds must be at least 1")
    if args.rate < 0:
        parser.error(f"--rate must not be negative, got {args.rate}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve == "aio")
        return 0
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in args.shapes}
    for r in range(args.rounds):
        order = args.shapes if r % 2 == 0 else list(reversed(args.shapes))
        for shape in order:
            figures = measure(shape, args.exchanges, args.rate)
            runs[shape].append(figures)
            say(f"round {r + 1} {shape}: {figures}")
    medians = {s: summarise(v) for s, v in runs.items()}
    if args.plot is not None:
        plot(args.plot, medians, args.rate)
        say(f"plot: {args.plot}")
    result = {
        "benchmark": "grpc_floor",
        "shapes": medians,
        "runs": runs,
        "grpc_experiments": os.environ.get("GRPC_EXPERIMENTS", ""),
        "grpcio": grpc.__version__,
        "params": {
            "exchanges": args.exchanges,
            "rounds": args.rounds,
            "rate_per_s": args.rate or "back to back",
            "payload_bytes": len(PAYLOAD),
        },
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "units": "exchanges/s; µs of CPU per exchange; context switches per exchange",
        "notes": [
            "one exchange at a time: a round trip's cost, not a throughput ceiling",
            "oneway-sync: one message one way per exchange, nothing answered per message",
            "server_switches counts every thread of the echo server process",
        ],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
