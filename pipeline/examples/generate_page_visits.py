"""Produce page-visit events for the page_visits example.

    python -m seglog.pipeline.examples.generate_page_visits --bootstrap-server 127.0.0.1:9192 \
        [--events 1000] [--minutes 5] [--topic page_visits] [--seed 1]

Each event is a JSON value `{"page": "/home", "user": "u7", "ts": <epoch ms>}` keyed
by user; timestamps are spread over the last `--minutes` minutes, in order, and
are also the records' timestamps. The topic is created (3 partitions) if missing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence

from seglog.client.admin import Admin, NewTopic
from seglog.client.producer import Producer

PAGES = ("/home", "/search", "/product", "/cart", "/checkout", "/about")
USERS = 50


def ensure_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topics([NewTopic(topic, partitions, 1)])


def make_events(count: int, minutes: float, seed: int, end_ms: int) -> list[dict]:
    """`count` events with timestamps spread evenly, in order, over the `minutes`
    before `end_ms`; pages and users drawn at random (popular pages more often)."""
    rng = random.Random(seed)
    span_ms = int(minutes * 60_000)
    start_ms = end_ms - span_ms
    weights = [len(PAGES) - i for i in range(len(PAGES))]
    return [
        {
            "page": rng.choices(PAGES, weights)[0],
            "user": f"u{rng.randrange(USERS)}",
            "ts": start_ms + (span_ms * i) // max(count, 1),
        }
        for i in range(count)
    ]


def produce(bootstrap: str, topic: str, events: Sequence[dict]) -> None:
    with Producer(bootstrap, linger_ms=20) as producer:
        for e in events:
            producer.send(
                topic,
                value=json.dumps(e).encode(),
                key=e["user"].encode(),
                timestamp_ms=e["ts"],
            )
        producer.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a seglog node")
    parser.add_argument("--topic", default="page_visits")
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=5.0, help="event-time span")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    ensure_topic(args.bootstrap_server, args.topic)
    events = make_events(args.events, args.minutes, args.seed, int(time.time() * 1000))
    produce(args.bootstrap_server, args.topic, events)
    print(f"produced {len(events)} events to {args.topic}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
