"""The `seglog` format's options: Spark's Kafka source and sink options, same names,
same defaults, same errors where Spark has them.

Which partitions: exactly one of `subscribe` ("t1,t2"), `subscribePattern` (a
regex over topic names) or `assign` (JSON `{"t1": [0, 1]}`).
Where to start and stop: `startingOffsets` / `endingOffsets` ("earliest",
"latest" or offsets JSON), or by time: `startingTimestamp` / `endingTimestamp`
(epoch ms, every partition) and `startingOffsetsByTimestamp` /
`endingOffsetsByTimestamp` (JSON of epoch ms per partition), which take
precedence in that order, as in Spark.

`bootstrap.servers` (or Spark's `kafka.bootstrap.servers`) names the cluster;
other `kafka.<config>` options set the seglog client's config of that name
(`kafka.max.partition.fetch.bytes`, `kafka.linger.ms`, ...). Client configs
seglog has no use for (security, SASL) are ignored with a warning.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seglog.client.cluster import TopicPartition

from .offsets import EARLIEST, LATEST, PartitionOffsets, offsets_from_dict, parse_offsets_json

_log = logging.getLogger(__name__)

# Spark's default for kafkaConsumer.pollTimeoutMs is spark.network.timeout (120 s).
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's maxTriggerDelay default, 15m
# Spark's time strings (JavaUtils.timeStringAsMs): a number and an optional unit.
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}

def _kwargs(convert: Callable[[str], Any], *names: str) -> dict[str, tuple[str, Callable]]:
    """kafka.<name> → the seglog client's keyword argument of that name (dots as
    underscores) and the conversion of the option's string."""
    return {name: (name.replace(".", "_"), convert) for name in names}


# The configs both clients take (Kafka's CommonClientConfigs).
_COMMON_CONFIGS = _kwargs(int, "request.timeout.ms", "retry.backoff.ms", "metadata.max.age.ms")
CONSUMER_CONFIGS = {
    **_kwargs(str, "client.id"),
    **_kwargs(
        int,
        "fetch.min.bytes",
        "fetch.max.wait.ms",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "max.poll.records",
        "retry.backoff.max.ms",
    ),
    **_COMMON_CONFIGS,
}
PRODUCER_CONFIGS = {
    **_kwargs(str, "acks", "compression.type"),
    **_kwargs(
        int,
        "linger.ms",
        "batch.size",
        "max.request.size",
        "retries",
        "delivery.timeout.ms",
        "max.in.flight.requests.per.connection",
        "buffer.memory",
        "max.block.ms",
        "transaction.timeout.ms",
    ),
    **_kwargs(lambda v: _parse_bool("enable.idempotence", v), "enable.idempotence"),
    **_COMMON_CONFIGS,
}
# What Spark's Kafka source refuses, with its reasons.
_REFUSED = {
    "auto.offset.reset": "set startingOffsets instead",
    "key.deserializer": "keys are always read as bytes; cast them in the query",
    "value.deserializer": "values are always read as bytes; cast them in the query",
    "key.serializer": "keys must be string or binary columns",
    "value.serializer": "values must be string or binary columns",
    "enable.auto.commit": "the source does not commit offsets",
    "interceptor.classes": "interceptors could break the query",
    "transactional.id": (
        "set the sink's transactionalIdPrefix instead (each task's transactional id is "
        "<prefix>-<partition id>)"
    ),
}
_SUBSCRIPTIONS = ("assign", "subscribe", "subscribepattern")


def _parse_bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ValueError(f"option {name} must be true or false, got {value!r}")


def _parse_int(name: str, value: str, minimum: int) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, got {n}")
    return n


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or stop: `kind` is earliest, latest, offsets (per partition,
    -2/-1 allowed), timestamp (one for all partitions) or timestamps (per partition)."""

    kind: str
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps({f"{tp.topic}-{tp.partition}": o for tp, o in self.offsets.items()})


def _client_configs(options: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    consumer: dict[str, Any] = {}
    producer: dict[str, Any] = {}
    for raw_name, value in options.items():
        name = raw_name.lower()
        if not name.startswith("kafka.") or name == "kafka.bootstrap.servers":
            continue
        config = name[len("kafka.") :]
        if config in _REFUSED:
            raise ValueError(f"Kafka option '{config}' is not supported: {_REFUSED[config]}")
        known = False
        for table, out in ((CONSUMER_CONFIGS, consumer), (PRODUCER_CONFIGS, producer)):
            if config in table:
                kwarg, convert = table[config]
                try:
                    out[kwarg] = convert(value)
                except ValueError as e:
                    raise ValueError(f"option {raw_name}: {e}") from None
                known = True
        if not known and config != "group.id":
            _log.warning("option %s has no seglog equivalent and is ignored", raw_name)
    return consumer, producer


def bootstrap_servers(options: Mapping[str, str]) -> str:
    lowered = {k.lower(): v for k, v in options.items()}
    servers = lowered.get("bootstrap.servers") or lowered.get("kafka.bootstrap.servers")
    if not servers:
        raise ValueError(
            "option bootstrap.servers (or kafka.bootstrap.servers) must name the cluster, "
            "e.g. 127.0.0.1:9192"
        )
    return servers


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    consumer_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> SourceOptions:
        o = {k.lower(): v for k, v in options.items()}
        given = [name for name in _SUBSCRIPTIONS if o.get(name)]
        if len(given) != 1:
            raise ValueError(
                "exactly one of the options subscribe, subscribePattern or assign must be "
                f"given, got {len(given)}" + (f" ({', '.join(given)})" if given else "")
            )
        subscribe = pattern = assign = None
        if given[0] == "subscribe":
            subscribe = tuple(t.strip() for t in o["subscribe"].split(",") if t.strip())
            if not subscribe:
                raise ValueError(f"option subscribe names no topic: {o['subscribe']!r}")
        elif given[0] == "subscribepattern":
            pattern = o["subscribepattern"]
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(
                    f"option subscribePattern {pattern!r} is not a regex: {e}"
                ) from None
        else:
            assign = _parse_assign(o["assign"])

        starting = _offset_spec(o, "starting", "earliest" if not streaming else "latest")
        ending = _offset_spec(o, "ending", "latest")
        if streaming and any(
            k in o for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
        ):
            raise ValueError("ending offsets are not valid in streaming queries")
        if not streaming:
            if starting.kind == "latest" or (
                starting.kind == "offsets" and LATEST in starting.offsets.values()
            ):
                raise ValueError("starting offset can't be latest for batch queries")
            if ending.kind == "earliest" or (
                ending.kind == "offsets" and EARLIEST in ending.offsets.values()
            ):
                raise ValueError("ending offset can't be earliest for batch queries")
        strategy = o.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(
                f"startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
            )
        consumer_config, _ = _client_configs(options)
        return cls(
            bootstrap_servers=bootstrap_servers(options),
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            by_timestamp_strategy=strategy,
            fail_on_data_loss=_parse_bool("failOnDataLoss", o.get("failondataloss", "true")),
            min_partitions=_optional_int(o, "minPartitions", 1),
            max_records_per_partition=_optional_int(o, "maxRecordsPerPartition", 1),
            max_offsets_per_trigger=_optional_int(o, "maxOffsetsPerTrigger", 1),
            min_offsets_per_trigger=_optional_int(o, "minOffsetsPerTrigger", 1),
            max_trigger_delay_ms=_parse_duration_ms(
                "maxTriggerDelay", o.get("maxtriggerdelay", "15m")
            ),
            include_headers=_parse_bool("includeHeaders", o.get("includeheaders", "false")),
            poll_timeout_ms=_parse_int(
                "kafkaConsumer.pollTimeoutMs",
                o.get("kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS),
                1,
            ),
            consumer_config=consumer_config,
        )


@dataclass(frozen=True)
class SinkOptions:
    """`transactionalIdPrefix` turns on the exactly-once mode (txn_sink.py): each task
    writes in a transaction with the id `<prefix>-<partition id>` that the driver
    commits; `kafka.transaction.timeout.ms` (Kafka's default 60000) must cover a whole
    micro-batch or job, from a task's first record to the driver's commit."""

    bootstrap_servers: str
    topic: str | None = None
    producer_config: dict[str, Any] = field(default_factory=dict)
    transactional_id_prefix: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        o = {k.lower(): v for k, v in options.items()}
        _, producer_config = _client_configs(options)
        topic = o.get("topic") or None
        prefix = o.get("transactionalidprefix")
        if prefix is not None:
            prefix = prefix.strip()
            if not prefix:
                raise ValueError("option transactionalIdPrefix must not be empty")
            acks = str(producer_config.get("acks", "all")).strip().lower()
            if acks not in ("all", "-1"):
                raise ValueError(f"option transactionalIdPrefix needs kafka.acks=all, got {acks!r}")
            if producer_config.get("enable_idempotence") is False:
                raise ValueError(
                    "option transactionalIdPrefix needs idempotence: "
                    "kafka.enable.idempotence=false conflicts"
                )
        elif "transaction_timeout_ms" in producer_config:
            raise ValueError(
                "option kafka.transaction.timeout.ms needs transactionalIdPrefix (the "
                "exactly-once mode); without it the sink writes no transactions"
            )
        return cls(bootstrap_servers(options), topic, producer_config, prefix)


def _parse_duration_ms(name: str, value: str) -> int:
    """Spark's time string ("15m", "30s", "500ms", "1h"; a bare number is ms)."""
    m = _DURATION.match(str(value))
    if m is None:
        raise ValueError(f"{name} must be a duration like 15m, 30s or 500ms, got {value!r}")
    unit = (m.group(2) or "ms").lower()
    return int(int(m.group(1)) * _DURATION_MS.get(unit, 86_400_000))


def _optional_int(o: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = o.get(name.lower())
    return None if value is None else _parse_int(name, value, minimum)


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f'option assign must be JSON like {{"topic": [0, 1]}}: {e}') from None
    if not isinstance(data, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
        for ps in data.values()
    ):
        raise ValueError(f'option assign must be JSON like {{"topic": [0, 1]}}, got {text!r}')
    tps = tuple(TopicPartition(t, p) for t, ps in data.items() for p in ps)
    if not tps:
        raise ValueError("option assign names no partition")
    return tps


def _offset_spec(o: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """Spark's precedence: <which>Timestamp, then <which>OffsetsByTimestamp,
    then <which>Offsets."""
    ts = o.get(f"{which}timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=_parse_int(f"{which}Timestamp", ts, 0))
    by_ts = o.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        option = f"{which}OffsetsByTimestamp"
        try:
            data = json.loads(by_ts)
        except json.JSONDecodeError as e:
            raise ValueError(
                f'{option} must be JSON like {{"t": {{"0": 1700000000000}}}}: {e}'
            ) from None
        return OffsetSpec("timestamps", offsets=offsets_from_dict(data, option))
    text = o.get(f"{which}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", offsets=parse_offsets_json(text, f"{which}Offsets"))
