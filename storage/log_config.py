"""Per-topic log settings (Kafka's LogConfig) and the broker-level settings that default them.

Names, types, defaults and valid ranges follow Kafka 3.9 / 4.0 (`LogConfig`, `ServerLogConfigs`,
`ServerTopicConfigSynonyms`); so does the wording of errors, which is what a client sees in
CreateTopics / AlterConfigs responses, e.g.
``Invalid value abc for configuration segment.bytes: Not a number of type INT``.

A value is a string (from a properties file, the CLI or a request) or an already typed Python
value. Strings are trimmed; booleans are ``true``/``false`` in any case; lists are
comma-separated.

Deliberate differences from Kafka: NaN is refused for the dirty ratio (Java's range check lets it
through); an out-of-range *derived* broker value (e.g. ``log.roll.ms=0``) is reported under the
broker name the operator wrote rather than the topic name; hex floats are not parsed.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Any, NamedTuple

from .errors import InvalidConfigError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

ConfigValue = bool | int | float | str | tuple[str, ...]

CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICY_DELETE = "delete"
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's BrokerCompressionType order, which its error message lists.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_HOUR_MS = 60 * 60 * 1000
_MINUTE_MS = 60 * 1000


class ConfigType(Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"


class ConfigSource(IntEnum):
    """Where a value came from; the numbers are DescribeConfigs' wire ids."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigEntry(NamedTuple):
    name: str
    value: str
    source: ConfigSource

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


# --------------------------------------------------------------------------------------------
# Parsing, validation and rendering (Kafka's ConfigDef)
# --------------------------------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble grammar without hex floats; a trailing f/F/d/D is allowed.
_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
)
_COMMA = re.compile(r"\s*,\s*")
_INT_BOUNDS = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX)}


def _java_trim(s: str) -> str:
    """String.trim(): strips every char <= U+0020 at both ends."""
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def java_double_str(x: float) -> str:
    """Java's Double.toString: shortest digits, scientific outside [1e-3, 1e7)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)  # positional in this range, always with a fraction part
    sign, digit_tuple, exp = Decimal(repr(x)).as_tuple()
    digits = list(digit_tuple)
    assert isinstance(exp, int)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exp += 1
    mantissa = f"{digits[0]}." + ("".join(map(str, digits[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp + len(digits) - 1}"


def _show(value: object) -> str:
    """A value as Java's toString would print it in an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _invalid(name: str, value: object, message: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {_show(value)} for configuration {name}: {message}")


@dataclass(frozen=True)
class ConfigKey:
    """One setting: its name, type, default and what values are allowed."""

    name: str
    type: ConfigType
    default: ConfigValue | None  # None: no default (a broker synonym that applies only if set)
    at_least: int | None = None
    at_most: int | None = None
    one_of: tuple[str, ...] | None = None

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")

    def parse(self, value: object, report_as: str | None = None) -> ConfigValue:
        """Convert and validate; errors name `report_as` (default: this key's name)."""
        name = report_as or self.name
        parsed = self._convert(name, value)
        self._ensure_valid(name, parsed)
        return parsed

    def render(self, value: ConfigValue) -> str:
        """Kafka's ConfigDef.convertToString."""
        if isinstance(value, tuple):
            return ",".join(value)
        return _show(value)

    def _convert(self, name: str, value: object) -> ConfigValue:
        t = self.type
        trimmed = _java_trim(value) if isinstance(value, str) else None
        if t is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if trimmed is not None and trimmed.lower() in ("true", "false"):
                return trimmed.lower() == "true"
            raise _invalid(name, value, "Expected value to be either true or false")
        if t is ConfigType.STRING:
            if trimmed is None:
                raise _invalid(name, value, _wrong_type("a string", value))
            return trimmed
        if t is ConfigType.INT or t is ConfigType.LONG:
            lo, hi = _INT_BOUNDS[t]
            if trimmed is not None:
                if not _INTEGER.fullmatch(trimmed) or not lo <= int(trimmed) <= hi:
                    raise _invalid(name, value, f"Not a number of type {t.value}")
                return int(trimmed)
            if isinstance(value, int) and not isinstance(value, bool):
                if not lo <= value <= hi:
                    raise _invalid(name, value, f"Not a number of type {t.value}")
                return value
            what = "a 32-bit integer" if t is ConfigType.INT else "a 64-bit integer (long)"
            raise _invalid(name, value, _wrong_type(what, value))
        if t is ConfigType.DOUBLE:
            if trimmed is not None:
                if not _DOUBLE.fullmatch(trimmed):
                    raise _invalid(name, value, "Not a number of type DOUBLE")
                return float(trimmed.rstrip("fFdD"))
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            raise _invalid(name, value, _wrong_type("a double", value))
        # LIST
        if trimmed is not None:
            return tuple(_COMMA.split(trimmed)) if trimmed else ()
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise _invalid(name, value, "Expected a comma separated list.")

    def _ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, tuple):
            # Kafka 3.9/4.0 check each element only (no duplicate or empty-list check).
            for item in value:
                self._ensure_one_of(name, item)
        elif isinstance(value, str):
            self._ensure_one_of(name, value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if isinstance(value, float) and math.isnan(value):
                raise _invalid(
                    name, value, f"Value must be between {self.at_least} and {self.at_most}"
                )
            if self.at_least is not None and value < self.at_least:
                raise _invalid(name, value, f"Value must be at least {self.at_least}")
            if self.at_most is not None and value > self.at_most:
                raise _invalid(name, value, f"Value must be no more than {self.at_most}")

    def _ensure_one_of(self, name: str, value: str) -> None:
        if self.one_of is not None and value not in self.one_of:
            raise _invalid(name, value, "String must be one of: " + ", ".join(self.one_of))


def _wrong_type(expected: str, value: object) -> str:
    return f"Expected value to be {expected}, but it was a {type(value).__name__}"


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}


def _normalize(obj: object, keys: Mapping[str, ConfigKey]) -> None:
    """Parse and validate every field of a frozen settings dataclass in place."""
    for key in keys.values():
        object.__setattr__(obj, key.attr, key.parse(getattr(obj, key.attr)))


_T = ConfigType

# --------------------------------------------------------------------------------------------
# Topic-level settings
# --------------------------------------------------------------------------------------------

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_MS = 7 * 24 * _HOUR_MS
DEFAULT_RETENTION_MS = 7 * 24 * _HOUR_MS
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # 1 MiB plus the 12-byte log overhead

# Ranges are Kafka's; segment.bytes >= 14 (a legacy v0 record's overhead) is the 3.9/4.0 minimum.
TOPIC_CONFIG_KEYS: Mapping[str, ConfigKey] = _keys(
    ConfigKey("segment.bytes", _T.INT, DEFAULT_SEGMENT_BYTES, at_least=14),
    ConfigKey("segment.ms", _T.LONG, DEFAULT_SEGMENT_MS, at_least=1),
    ConfigKey("segment.jitter.ms", _T.LONG, 0, at_least=0),
    ConfigKey("segment.index.bytes", _T.INT, DEFAULT_SEGMENT_INDEX_BYTES, at_least=4),
    ConfigKey("index.interval.bytes", _T.INT, 4096, at_least=0),
    ConfigKey("flush.messages", _T.LONG, LONG_MAX, at_least=1),
    ConfigKey("flush.ms", _T.LONG, LONG_MAX, at_least=0),
    ConfigKey("retention.bytes", _T.LONG, -1),  # any negative disables size retention
    ConfigKey("retention.ms", _T.LONG, DEFAULT_RETENTION_MS, at_least=-1),
    ConfigKey("max.message.bytes", _T.INT, DEFAULT_MAX_MESSAGE_BYTES, at_least=0),
    ConfigKey("file.delete.delay.ms", _T.LONG, 60_000, at_least=0),
    ConfigKey("delete.retention.ms", _T.LONG, 24 * _HOUR_MS, at_least=0),
    ConfigKey("min.compaction.lag.ms", _T.LONG, 0, at_least=0),
    ConfigKey("max.compaction.lag.ms", _T.LONG, LONG_MAX, at_least=1),
    ConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, 0.5, at_least=0, at_most=1),
    ConfigKey(
        "cleanup.policy",
        _T.LIST,
        (CLEANUP_POLICY_DELETE,),
        one_of=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
    ),
    ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, False),
    ConfigKey("min.insync.replicas", _T.INT, 1, at_least=1),
    ConfigKey("compression.type", _T.STRING, "producer", one_of=COMPRESSION_TYPES),
    ConfigKey("preallocate", _T.BOOLEAN, False),
    ConfigKey("message.timestamp.type", _T.STRING, "CreateTime", one_of=TIMESTAMP_TYPES),
    ConfigKey("message.timestamp.before.max.ms", _T.LONG, LONG_MAX, at_least=0),
    ConfigKey("message.timestamp.after.max.ms", _T.LONG, LONG_MAX, at_least=0),
    # Replication throttles (seglog.replication.throttle): "*" or partition:broker
    # entries; no broker-level synonym, as in Kafka.
    ConfigKey("leader.replication.throttled.replicas", _T.LIST, ()),
    ConfigKey("follower.replication.throttled.replicas", _T.LIST, ()),
)
TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(TOPIC_CONFIG_KEYS)


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker-level name that supplies a topic-level default."""

    key: ConfigKey
    to_ms: int = 1  # unit factor for the *.hours / *.minutes variants


def _syn(name: str, type_: ConfigType, default: ConfigValue | None, **kw: Any) -> BrokerSynonym:
    to_ms = kw.pop("to_ms", 1)
    return BrokerSynonym(ConfigKey(name, type_, default, **kw), to_ms)


# Topic name -> broker names, highest precedence first (ServerTopicConfigSynonyms). Each broker
# name carries its own KafkaConfig type and range; the converted value must then also pass the
# topic-level check (as it does in Kafka, where the broker map is fed to LogConfig).
BROKER_SYNONYMS: Mapping[str, tuple[BrokerSynonym, ...]] = {
    "segment.bytes": (_syn("log.segment.bytes", _T.INT, DEFAULT_SEGMENT_BYTES, at_least=14),),
    "segment.ms": (
        _syn("log.roll.ms", _T.LONG, None),
        _syn("log.roll.hours", _T.INT, 168, at_least=1, to_ms=_HOUR_MS),
    ),
    "segment.jitter.ms": (
        _syn("log.roll.jitter.ms", _T.LONG, None),
        _syn("log.roll.jitter.hours", _T.INT, 0, at_least=0, to_ms=_HOUR_MS),
    ),
    "segment.index.bytes": (
        _syn("log.index.size.max.bytes", _T.INT, DEFAULT_SEGMENT_INDEX_BYTES, at_least=4),
    ),
    "index.interval.bytes": (_syn("log.index.interval.bytes", _T.INT, 4096, at_least=0),),
    "flush.messages": (_syn("log.flush.interval.messages", _T.LONG, LONG_MAX, at_least=1),),
    "flush.ms": (
        _syn("log.flush.interval.ms", _T.LONG, None),
        _syn("log.flush.scheduler.interval.ms", _T.LONG, LONG_MAX),
    ),
    "retention.bytes": (_syn("log.retention.bytes", _T.LONG, -1),),
    "retention.ms": (
        _syn("log.retention.ms", _T.LONG, None),
        _syn("log.retention.minutes", _T.INT, None, to_ms=_MINUTE_MS),
        _syn("log.retention.hours", _T.INT, 168, to_ms=_HOUR_MS),
    ),
    "max.message.bytes": (
        _syn("message.max.bytes", _T.INT, DEFAULT_MAX_MESSAGE_BYTES, at_least=0),
    ),
    "file.delete.delay.ms": (_syn("log.segment.delete.delay.ms", _T.LONG, 60_000, at_least=0),),
    "delete.retention.ms": (
        _syn("log.cleaner.delete.retention.ms", _T.LONG, 24 * _HOUR_MS, at_least=0),
    ),
    "min.compaction.lag.ms": (_syn("log.cleaner.min.compaction.lag.ms", _T.LONG, 0, at_least=0),),
    "max.compaction.lag.ms": (
        _syn("log.cleaner.max.compaction.lag.ms", _T.LONG, LONG_MAX, at_least=1),
    ),
    "min.cleanable.dirty.ratio": (
        _syn("log.cleaner.min.cleanable.ratio", _T.DOUBLE, 0.5, at_least=0, at_most=1),
    ),
    "cleanup.policy": (
        _syn(
            "log.cleanup.policy",
            _T.LIST,
            (CLEANUP_POLICY_DELETE,),
            one_of=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
        ),
    ),
    "unclean.leader.election.enable": (_syn("unclean.leader.election.enable", _T.BOOLEAN, False),),
    "min.insync.replicas": (_syn("min.insync.replicas", _T.INT, 1, at_least=1),),
    "compression.type": (
        _syn("compression.type", _T.STRING, "producer", one_of=COMPRESSION_TYPES),
    ),
    "preallocate": (_syn("log.preallocate", _T.BOOLEAN, False),),
    "message.timestamp.type": (
        _syn("log.message.timestamp.type", _T.STRING, "CreateTime", one_of=TIMESTAMP_TYPES),
    ),
    "message.timestamp.before.max.ms": (
        _syn("log.message.timestamp.before.max.ms", _T.LONG, LONG_MAX, at_least=0),
    ),
    "message.timestamp.after.max.ms": (
        _syn("log.message.timestamp.after.max.ms", _T.LONG, LONG_MAX, at_least=0),
    ),
}


def broker_synonyms(topic_name: str) -> tuple[str, ...]:
    """The broker-level names for a topic setting, highest precedence first."""
    return tuple(s.key.name for s in BROKER_SYNONYMS.get(topic_name, ()))


def _check_compaction_lags(min_lag: int, max_lag: int) -> None:
    if min_lag > max_lag:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})"
        )


_THROTTLED_ENTRY = re.compile(r"^\s*([0-9]+)\s*:\s*([0-9]+)\s*$")


def parse_throttled_replicas(value: Iterable[str], name: str) -> frozenset[tuple[int, int]] | None:
    """A *.replication.throttled.replicas list: None for "*" (every replica), else its
    (partition, broker) pairs. Raises ValueError naming the bad entry."""
    entries = [e.strip() for e in value if e.strip()]
    if entries == ["*"]:
        return None
    out = set()
    for e in entries:
        m = _THROTTLED_ENTRY.match(e)
        if m is None:
            raise ValueError(
                f'{name}: {e!r} is not partitionId:brokerId (the list is "*" or '
                f"entries like 0:101,1:102)"
            )
        out.add((int(m.group(1)), int(m.group(2))))
    return frozenset(out)


def _check_throttled_replicas(config: LogConfig) -> None:
    for side in ("leader", "follower"):
        name = f"{side}.replication.throttled.replicas"
        value = getattr(config, name.replace(".", "_"))
        try:
            parse_throttled_replicas(value, name)
        except ValueError as e:
            raise InvalidConfigError(str(e)) from None


def _check_names(props: Mapping[str, object]) -> None:
    for name in props:
        if name not in TOPIC_CONFIG_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")


@dataclass(frozen=True)
class LogConfig:
    """The effective log settings of one partition; construction validates every field.

    `topic_overrides` / `broker_overrides` record which topic-level names were set on the topic
    or came from an explicitly set broker name; they feed `describe()` and do not take part in
    equality.
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = DEFAULT_RETENTION_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    file_delete_delay_ms: int = 60_000
    delete_retention_ms: int = 24 * _HOUR_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    preallocate: bool = False
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    topic_overrides: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    broker_overrides: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        _normalize(self, TOPIC_CONFIG_KEYS)
        _check_compaction_lags(self.min_compaction_lag_ms, self.max_compaction_lag_ms)
        _check_throttled_replicas(self)
        for names in (self.topic_overrides, self.broker_overrides):
            _check_names(dict.fromkeys(names))
        object.__setattr__(self, "topic_overrides", frozenset(self.topic_overrides))
        object.__setattr__(self, "broker_overrides", frozenset(self.broker_overrides))

    # ---- construction ---------------------------------------------------------------------

    @classmethod
    def defaults(cls) -> LogConfig:
        return cls()

    @classmethod
    def from_broker(cls, props: Mapping[str, object]) -> LogConfig:
        """Topic defaults from a broker config; names that are not log settings are ignored.

        Every log name present is validated, even one shadowed by a higher-precedence synonym
        (KafkaConfig parses them all). Negative retention at any of log.retention.{ms,minutes,
        hours} means unlimited (-1).
        """
        parsed: dict[str, ConfigValue] = {}
        for synonyms in BROKER_SYNONYMS.values():
            for syn in synonyms:
                if syn.key.name in props:
                    parsed[syn.key.name] = syn.key.parse(props[syn.key.name])
        # Any: each value is parsed and validated for its own field by ConfigKey.parse.
        values: dict[str, Any] = {}
        for topic_name, synonyms in BROKER_SYNONYMS.items():
            for syn in synonyms:
                if syn.key.name not in parsed:
                    continue
                value = parsed[syn.key.name]
                if syn.to_ms != 1:
                    assert isinstance(value, int)
                    value = value * syn.to_ms
                if topic_name == "retention.ms" and isinstance(value, int) and value < 0:
                    value = -1
                key = TOPIC_CONFIG_KEYS[topic_name]
                values[key.attr] = key.parse(value, report_as=syn.key.name)
                break
        names = frozenset(n for n in TOPIC_CONFIG_NAMES if TOPIC_CONFIG_KEYS[n].attr in values)
        return cls(**values, broker_overrides=names)

    def with_overrides(self, topic_props: Mapping[str, object]) -> LogConfig:
        """These settings with topic-level overrides applied; unknown names are an error."""
        _check_names(topic_props)
        changes: dict[str, Any] = {
            TOPIC_CONFIG_KEYS[name].attr: TOPIC_CONFIG_KEYS[name].parse(value)
            for name, value in topic_props.items()
        }
        return replace(self, **changes, topic_overrides=self.topic_overrides | set(topic_props))

    @classmethod
    def from_topic_props(
        cls, props: Mapping[str, object], broker_defaults: LogConfig | None = None
    ) -> LogConfig:
        return (broker_defaults or cls.defaults()).with_overrides(props)

    @classmethod
    def validate_topic_overrides(
        cls, props: Mapping[str, object], broker_defaults: LogConfig | None = None
    ) -> None:
        """Raise InvalidConfigError unless `props` are valid topic overrides (CreateTopics,
        AlterConfigs); cross-field checks see the broker defaults for names not in `props`."""
        cls.from_topic_props(props, broker_defaults)

    # ---- reading --------------------------------------------------------------------------

    def get(self, name: str) -> ConfigValue:
        """A setting by its topic-level name."""
        _check_names({name: None})
        value: ConfigValue = getattr(self, TOPIC_CONFIG_KEYS[name].attr)
        return value

    def to_topic_props(self, *, overrides_only: bool = False) -> dict[str, str]:
        """Topic-level names to Kafka's string rendering (all, or only the topic's overrides)."""
        return {
            name: key.render(getattr(self, key.attr))
            for name, key in TOPIC_CONFIG_KEYS.items()
            if not overrides_only or name in self.topic_overrides
        }

    def describe(self) -> list[ConfigEntry]:
        """(name, value, source) for every setting, as DescribeConfigs reports a topic."""
        entries = []
        for name, value in self.to_topic_props().items():
            if name in self.topic_overrides:
                source = ConfigSource.DYNAMIC_TOPIC_CONFIG
            elif name in self.broker_overrides:
                source = ConfigSource.STATIC_BROKER_CONFIG
            else:
                source = ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source))
        return entries

    # ---- derived values used by the log ---------------------------------------------------

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Time limit for rolling: compacted topics also roll by max.compaction.lag.ms."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Drawn once per segment: abs(random int32) % min(jitter, segment.ms), as Kafka does."""
        if self.segment_jitter_ms == 0:
            return 0
        r = (rng or random).getrandbits(32)
        signed = r - 2**32 if r > INT_MAX else r
        magnitude = 0 if signed == INT_MIN else abs(signed)  # Kafka's Utils.abs
        return magnitude % min(self.segment_jitter_ms, self.segment_ms)


# --------------------------------------------------------------------------------------------
# Broker-only settings of the log layer
# --------------------------------------------------------------------------------------------

BROKER_LOG_SETTING_KEYS: Mapping[str, ConfigKey] = _keys(
    ConfigKey("log.retention.check.interval.ms", _T.LONG, 5 * _MINUTE_MS, at_least=1),
    ConfigKey("log.initial.task.delay.ms", _T.LONG, 30_000, at_least=0),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", _T.INT, 60_000, at_least=0),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", _T.INT, 60_000, at_least=0),
    ConfigKey("log.flush.scheduler.interval.ms", _T.LONG, LONG_MAX),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", _T.LONG, 5_000),
    ConfigKey("producer.id.expiration.ms", _T.INT, 24 * _HOUR_MS, at_least=1),
    ConfigKey("producer.id.expiration.check.interval.ms", _T.INT, 10 * _MINUTE_MS, at_least=1),
    ConfigKey("log.cleaner.enable", _T.BOOLEAN, True),
    ConfigKey("log.cleaner.threads", _T.INT, 1, at_least=0),
    ConfigKey("log.cleaner.dedupe.buffer.size", _T.LONG, 128 * 1024 * 1024),
    ConfigKey("log.cleaner.io.buffer.size", _T.INT, 512 * 1024, at_least=0),
    ConfigKey("log.cleaner.io.buffer.load.factor", _T.DOUBLE, 0.9),
    ConfigKey("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, DOUBLE_MAX),
    ConfigKey("log.cleaner.backoff.ms", _T.LONG, 15_000, at_least=0),
    # KIP-890: a leader asks the transaction coordinator before a transactional batch
    # opens a transaction in a partition (Kafka's ProducerStateManagerConfig has it too).
    ConfigKey("transaction.partition.verification.enable", _T.BOOLEAN, True),
)


@dataclass(frozen=True)
class BrokerLogSettings:
    """Broker-wide log-manager timers, producer-id expiry and the log cleaner's settings;
    no topic-level equivalent."""

    log_retention_check_interval_ms: int = 5 * _MINUTE_MS
    log_initial_task_delay_ms: int = 30_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_flush_scheduler_interval_ms: int = LONG_MAX
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    producer_id_expiration_ms: int = 24 * _HOUR_MS
    producer_id_expiration_check_interval_ms: int = 10 * _MINUTE_MS
    # The log cleaner (compacted topics): threads, the offset map's memory shared by
    # them, read/write buffers, the I/O throttle and the idle back-off.
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_io_buffer_size: int = 512 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_max_bytes_per_second: float = DOUBLE_MAX
    log_cleaner_backoff_ms: int = 15_000
    transaction_partition_verification_enable: bool = True

    def __post_init__(self) -> None:
        _normalize(self, BROKER_LOG_SETTING_KEYS)

    @classmethod
    def defaults(cls) -> BrokerLogSettings:
        return cls()

    @classmethod
    def from_broker(cls, props: Mapping[str, object]) -> BrokerLogSettings:
        """Read from a broker config; other names are ignored."""
        parsed: dict[str, Any] = {
            key.attr: key.parse(props[name])
            for name, key in BROKER_LOG_SETTING_KEYS.items()
            if name in props
        }
        return cls(**parsed)

    def to_props(self) -> dict[str, str]:
        return {
            name: key.render(getattr(self, key.attr))
            for name, key in BROKER_LOG_SETTING_KEYS.items()
        }


def _check_fields_match(cls: type, keys: Mapping[str, ConfigKey], extra: set[str]) -> None:
    # The dataclass fields are spelled out for type checkers; keep them in step with the table.
    declared = {f.name: f.default for f in fields(cls) if f.name not in extra}
    expected = {k.attr: k.default for k in keys.values()}
    if declared != expected:
        raise AssertionError(f"{cls.__name__} fields disagree with its key table")


_check_fields_match(LogConfig, TOPIC_CONFIG_KEYS, {"topic_overrides", "broker_overrides"})
_check_fields_match(BrokerLogSettings, BROKER_LOG_SETTING_KEYS, set())
