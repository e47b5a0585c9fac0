"""`seglog produce` and `seglog consume`: kafka-console-producer and
kafka-console-consumer for seglog, with their `--property` names and output format."""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, TextIO

from .arguments import (
    add_pairs_option,
    bootstrap_servers,
    open_admin,
    parse_pairs,
    security_options,
)

DEFAULT_PROGRESS_INTERVAL_MS = 5_000
# Sends awaited this far behind the newest: bounds memory and reports failures early.
MAX_IN_FLIGHT = 10_000
# Per-record failures printed in full; the rest are only counted.
MAX_REPORTED_ERRORS = 10


def _bool(props: dict[str, str], name: str, default: bool) -> bool:
    value = props.get(name)
    if value is None:
        return default
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError(f"--property {name}={value!r}: expected true or false")
    return v == "true"


def _check_properties(props: dict[str, str], known: Iterable[str]) -> None:
    # kafka's tools ignore unknown names; a typo silently doing nothing is worse.
    known = sorted(known)
    for name in props:
        if name not in known:
            raise ValueError(f"unknown --property {name!r}; known: {', '.join(known)}")


def _client_logs_to_stderr(prog: str, err: TextIO) -> None:
    """Client errors (a crashed sender thread) as one line each; warnings are
    dropped because the tools report each failed record themselves."""
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.ERROR)
    handler.setFormatter(logging.Formatter(f"{prog}: %(message)s"))
    logging.getLogger("seglog.client").addHandler(handler)


class Progress:
    """A status line on stderr every `interval_s` (never when 0)."""

    def __init__(self, prog: str, interval_ms: int, err: TextIO) -> None:
        if interval_ms < 0:
            raise ValueError(f"--progress-interval-ms must be >= 0, got {interval_ms}")
        self.prog = prog
        self.interval_s = interval_ms / 1000
        self.err = err
        self.next_at = time.monotonic() + self.interval_s
        self.shown = False

    def tick(self, message: str) -> None:
        if self.interval_s and time.monotonic() >= self.next_at:
            self.show(message)
            self.next_at = time.monotonic() + self.interval_s

    def show(self, message: str) -> None:
        print(f"{self.prog}: {message}", file=self.err, flush=True)
        self.shown = True


# --- produce ------------------------------------------------------------------------

_PRODUCER_PROPERTIES = {
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
}
_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def add_produce_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument(
        "--acks",
        "--request-required-acks",
        default="-1",
        choices=["0", "1", "-1", "all"],
        help="acknowledgements to wait for (default -1, i.e. all in-sync replicas)",
    )
    p.add_argument("--compression-type", default="none", choices=_COMPRESSION_TYPES)
    p.add_argument("--partition", type=int, help="send every record to this partition")
    add_pairs_option(
        p,
        "--property",
        "line reader settings: parse.key, key.separator (default tab), parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error",
    )
    p.add_argument(
        "--progress-interval-ms",
        type=int,
        default=DEFAULT_PROGRESS_INTERVAL_MS,
        metavar="MS",
        help="print a count on stderr this often (0: never; default %(default)s)",
    )


class LineReader:
    """kafka's LineMessageReader: `[headers<delim>][key<sep>]value` per line."""

    def __init__(self, props: dict[str, str]) -> None:
        _check_properties(props, _PRODUCER_PROPERTIES)
        self.parse_key = _bool(props, "parse.key", False)
        self.parse_headers = _bool(props, "parse.headers", False)
        self.ignore_error = _bool(props, "ignore.error", False)
        self.key_separator = props.get("key.separator", "\t").encode()
        self.headers_delimiter = props.get("headers.delimiter", "\t").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.headers_key_separator = props.get("headers.key.separator", ":").encode()
        marker = props.get("null.marker")
        self.null_marker = marker.encode() if marker is not None else None
        for name, sep in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if not sep:
                raise ValueError(f"--property {name} must not be empty")

    def _cut(self, line: bytes, start: int, sep: bytes, what: str, number: int) -> bytes | None:
        index = line.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise ValueError(f"No {what} found on line number {number}: {_show(line)}")
        return line[start:index]

    def parse(
        self, line: bytes, number: int
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line (without its line break)."""
        headers_part = None
        if self.parse_headers:
            headers_part = self._cut(line, 0, self.headers_delimiter, "headers delimiter", number)
        start = len(headers_part) + len(self.headers_delimiter) if headers_part is not None else 0
        key = None
        if self.parse_key:
            key = self._cut(line, start, self.key_separator, "key separator", number)
        if key is not None:
            start += len(key) + len(self.key_separator)
        value: bytes | None = line[start:]
        if key is not None and key == self.null_marker:
            key = None
        if value == self.null_marker:
            value = None
        headers: list[tuple[str, bytes | None]] = []
        if headers_part is not None and headers_part != self.null_marker:
            for pair in headers_part.split(self.headers_separator):
                index = pair.find(self.headers_key_separator)
                if index < 0:
                    if not self.ignore_error:
                        raise ValueError(
                            f"No header key separator found in pair {_show(pair)} "
                            f"on line number {number}"
                        )
                    name, hvalue = pair, None
                else:
                    name, hvalue = pair[:index], pair[index + len(self.headers_key_separator) :]
                if hvalue is not None and hvalue == self.null_marker:
                    hvalue = None
                headers.append((name.decode("utf-8", "replace"), hvalue))
        return key, value, headers


def _show(data: bytes) -> str:
    return repr(data.decode("utf-8", "replace"))


def _describe_record(key: bytes | None, value: bytes | None) -> str:
    k = "null" if key is None else f"{len(key)} bytes"
    v = "null" if value is None else f"{len(value)} bytes"
    return f"key: {k}, value: {v}"


def run_produce(
    args: argparse.Namespace, stdin: BinaryIO | None = None, err: TextIO | None = None
) -> int:
    from seglog.client.errors import KafkaError

    stdin = stdin or sys.stdin.buffer
    err = err or sys.stderr
    reader = LineReader(parse_pairs(args.property, "--property"))
    progress = Progress("seglog produce", args.progress_interval_ms, err)
    _client_logs_to_stderr("seglog produce", err)
    acks: int | str = "all" if args.acks == "all" else int(args.acks)
    # Fail fast and clearly on an unreachable cluster or a topic that cannot exist
    # (auto-creation off), before reading any input.
    with open_admin(args) as admin:
        topic = _topic_or_auto_created(admin, args.topic, err)
    if args.partition is not None and args.partition not in {p.partition for p in topic.partitions}:
        raise ValueError(
            f"--partition {args.partition}: topic {args.topic!r} has partitions "
            f"0..{len(topic.partitions) - 1}"
        )
    from seglog.client.producer import Producer

    producer = Producer(
        bootstrap_servers=bootstrap_servers(args),
        **security_options(args),
        acks=acks,
        compression_type=None if args.compression_type == "none" else args.compression_type,
        request_timeout_ms=args.request_timeout_ms,
        # Kafka's 120 s default, stretched so a long --request-timeout-ms stays valid.
        delivery_timeout_ms=max(120_000, args.request_timeout_ms + 1_000),
    )
    sent = acked = failed = 0
    in_flight: collections.deque[tuple[int, bytes | None, bytes | None, Any]] = collections.deque()

    def settle(number: int, key: bytes | None, value: bytes | None, future: Any) -> None:
        nonlocal acked, failed
        try:
            future.get()
            acked += 1
        except KafkaError as e:
            failed += 1
            if failed <= MAX_REPORTED_ERRORS:
                print(
                    f"seglog produce: error sending line {number} "
                    f"({_describe_record(key, value)}) to topic {args.topic}: {e}",
                    file=err,
                    flush=True,
                )

    try:
        for number, raw in enumerate(stdin, 1):
            line = raw.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            try:
                key, value, headers = reader.parse(line, number)
            except ValueError:
                # As kafka-console-producer: what was read before the bad line is still sent.
                producer.flush()
                while in_flight:
                    settle(*in_flight.popleft())
                raise
            future = producer.send(
                args.topic, value=value, key=key, headers=headers or None, partition=args.partition
            )
            sent += 1
            in_flight.append((number, key, value, future))
            if len(in_flight) > MAX_IN_FLIGHT:
                settle(*in_flight.popleft())
            while in_flight and in_flight[0][3].is_done:
                settle(*in_flight.popleft())
            progress.tick(f"{sent} messages sent, {acked} acknowledged")
        producer.flush()
        while in_flight:
            settle(*in_flight.popleft())
    finally:
        producer.close()
    if progress.shown:
        progress.show(f"{sent} messages sent, {acked} acknowledged")
    if failed:
        shown = f" (the first {MAX_REPORTED_ERRORS} above)" if failed > MAX_REPORTED_ERRORS else ""
        print(f"seglog produce: {failed} of {sent} messages failed{shown}", file=err, flush=True)
        return 1
    return 0


# --- consume ------------------------------------------------------------------------

_CONSUMER_PROPERTIES = {
    "print.timestamp",
    "print.key",
    "print.offset",
    "print.partition",
    "print.headers",
    "print.value",
    "key.separator",
    "line.separator",
    "headers.separator",
    "headers.key.separator",
    "null.literal",
}
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _topic_or_auto_created(admin: Any, name: str, err: TextIO) -> Any:
    """The topic's description; a missing topic is created as a producer's metadata
    request creates it (auto.create.topics.enable), and that is said, not done silently."""
    from seglog.client.errors import error_class

    try:
        (topic,) = admin.describe_topics([name])
        return topic
    except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
        pass
    (topic,) = admin.describe_topics([name], allow_auto_topic_creation=True)
    replicas = len(topic.partitions[0].replicas) if topic.partitions else 0
    print(
        f"seglog produce: topic {name!r} did not exist; the cluster created it "
        f"(auto.create.topics.enable) with {len(topic.partitions)} partitions and "
        f"replication factor {replicas} (choose them with 'seglog topics --create')",
        file=err,
    )
    return topic


def add_consume_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="only this partition (default: all)")
    p.add_argument(
        "--group",
        help="consume as a member of this consumer group: its partitions are shared with "
        "the group's other members and offsets are committed",
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest record")
    start.add_argument(
        "--offset",
        help="with --partition: earliest, latest, or an offset to start at (default latest)",
    )
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    add_pairs_option(
        p,
        "--property",
        "formatter settings: print.timestamp, print.partition, print.offset, "
        "print.headers, print.key, print.value, key.separator, line.separator, "
        "headers.separator, headers.key.separator, null.literal",
    )


class RecordFormatter:
    """kafka's DefaultMessageFormatter: timestamp, partition, offset, headers, key,
    value, in that order, joined by key.separator."""

    def __init__(self, props: dict[str, str]) -> None:
        _check_properties(props, _CONSUMER_PROPERTIES)
        self.print_timestamp = _bool(props, "print.timestamp", False)
        self.print_partition = _bool(props, "print.partition", False)
        self.print_offset = _bool(props, "print.offset", False)
        self.print_headers = _bool(props, "print.headers", False)
        self.print_key = _bool(props, "print.key", False)
        self.print_value = _bool(props, "print.value", True)
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.headers_key_separator = props.get("headers.key.separator", ":").encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def _bytes(self, data: bytes | str | None) -> bytes:
        if data is None:
            return self.null_literal
        return data.encode() if isinstance(data, str) else bytes(data)

    def format(self, record: Any) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            ts_type = record.timestamp_type
            name = ts_type if isinstance(ts_type, str) else _TIMESTAMP_TYPES.get(ts_type)
            fields.append(f"{name}:{record.timestamp}".encode() if name else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            headers = list(record.headers or [])
            if headers:
                fields.append(
                    self.headers_separator.join(
                        self._bytes(k) + self.headers_key_separator + self._bytes(v)
                        for k, v in headers
                    )
                )
            else:
                fields.append(self.null_literal)
        if self.print_key:
            fields.append(self._bytes(record.key))
        if self.print_value:
            fields.append(self._bytes(record.value))
        return self.key_separator.join(fields) + self.line_separator


def _start_offset(args: argparse.Namespace) -> int | str:
    """'earliest', 'latest' or an offset."""
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    if args.partition is None:
        raise ValueError("--offset needs --partition")
    value = args.offset.strip().lower()
    if value in ("earliest", "latest"):
        return value
    if not value.isdigit():
        raise ValueError(f"--offset {args.offset!r} is not earliest, latest or an offset >= 0")
    return int(value)


def run_consume(
    args: argparse.Namespace, out: BinaryIO | None = None, err: TextIO | None = None
) -> int:
    from seglog.client.cluster import TopicPartition
    from seglog.client.consumer import Consumer

    out = out or sys.stdout.buffer
    err = err or sys.stderr
    formatter = RecordFormatter(parse_pairs(args.property, "--property"))
    start = _start_offset(args)
    _client_logs_to_stderr("seglog consume", err)
    if args.max_messages is not None and args.max_messages < 0:
        raise ValueError(f"--max-messages must be >= 0, got {args.max_messages}")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise ValueError(f"--timeout-ms must be >= 0, got {args.timeout_ms}")
    if args.group is not None:
        if args.partition is not None or args.offset is not None:
            raise ValueError("--group cannot be used with --partition or --offset")
        return _consume_group(args, formatter, out, err)
    with open_admin(args) as admin:
        (topic,) = admin.describe_topics([args.topic])
    partitions = [p.partition for p in topic.partitions]
    if args.partition is not None:
        if args.partition not in partitions:
            from seglog.client.errors import error_class

            raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(
                f"topic {args.topic!r} has no partition {args.partition} "
                f"(it has {len(partitions)} partitions)"
            )
        partitions = [args.partition]
    tps = [TopicPartition(args.topic, p) for p in partitions]

    consumer = Consumer(
        bootstrap_servers=bootstrap_servers(args),
        **security_options(args),
        request_timeout_ms=args.request_timeout_ms,
        auto_offset_reset="earliest" if start == "earliest" else "latest",
        enable_auto_commit=False,
    )

    def begin() -> None:
        consumer.assign(tps)
        if start == "earliest":
            consumer.seek_to_beginning(*tps)
        elif start == "latest":
            consumer.seek_to_end(*tps)
        else:
            consumer.seek(tps[0], int(start))
        # Resolve the starting positions first, so --timeout-ms counts time with
        # nothing to read, not time spent connecting.
        for tp in tps:
            consumer.position(tp, timeout_ms=args.request_timeout_ms)

    return _consume(consumer, begin, formatter, args, out, err)


def _consume_group(
    args: argparse.Namespace, formatter: RecordFormatter, out: BinaryIO, err: TextIO
) -> int:
    """As a group member: start at the group's committed offsets (else earliest with
    --from-beginning, latest without), commit as it goes and when it ends."""
    from seglog.client.consumer import Consumer

    with open_admin(args) as admin:
        admin.describe_topics([args.topic])  # a clear error for a missing topic
    consumer = Consumer(
        bootstrap_servers=bootstrap_servers(args),
        **security_options(args),
        request_timeout_ms=args.request_timeout_ms,
        group_id=args.group,
        client_id="seglog-console-consumer",
        auto_offset_reset="earliest" if args.from_beginning else "latest",
    )
    return _consume(consumer, lambda: consumer.subscribe([args.topic]), formatter, args, out, err)


def _consume(
    consumer: Any,
    begin: Callable[[], None],
    formatter: RecordFormatter,
    args: argparse.Namespace,
    out: BinaryIO,
    err: TextIO,
) -> int:
    """`begin` (assign or subscribe), then print records until the end; the count goes
    to stderr however it ends, and the consumer is closed."""
    printed = _Printed()
    try:
        begin()
        _consume_loop(consumer, formatter, args, out, printed)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as a console tool should.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        consumer.close()
        print(f"Processed a total of {printed.count} messages", file=err, flush=True)
    return 0


class _Printed:
    """Records written so far; kept outside the loop so an interrupted run
    (Ctrl-C, closed pipe) still reports its count."""

    count = 0


def _consume_loop(
    consumer: Any,
    formatter: RecordFormatter,
    args: argparse.Namespace,
    out: BinaryIO,
    printed: _Printed,
) -> None:
    limit = args.max_messages
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    last_record_at = time.monotonic()
    while limit is None or printed.count < limit:
        wait_s = 0.5
        if timeout_s is not None:
            wait_s = min(wait_s, max(timeout_s - (time.monotonic() - last_record_at), 0))
        batches = consumer.poll(
            timeout_ms=int(wait_s * 1000),
            max_records=limit - printed.count if limit is not None else None,
        )
        records = [r for tp in sorted(batches, key=lambda tp: tp.partition) for r in batches[tp]]
        for record in records:
            out.write(formatter.format(record))
            printed.count += 1
        if records:
            out.flush()
            last_record_at = time.monotonic()
        elif timeout_s is not None and time.monotonic() - last_record_at >= timeout_s:
            break
