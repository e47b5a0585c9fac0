"""LogConfig / BrokerLogSettings: Kafka's names, defaults, synonyms, parsing and errors."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import (
    LONG_MAX,
    TOPIC_CONFIG_KEYS,
    TOPIC_CONFIG_NAMES,
    BrokerLogSettings,
    ConfigSource,
    LogConfig,
    broker_synonyms,
    java_double_str,
)

# Kafka's defaults, written out literally (not derived from the module under test).
KAFKA_TOPIC_DEFAULTS: dict[str, object] = {
    "leader.replication.throttled.replicas": (),
    "follower.replication.throttled.replicas": (),
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "flush.messages": 9223372036854775807,
    "flush.ms": 9223372036854775807,
    "retention.bytes": -1,
    "retention.ms": 604800000,
    "max.message.bytes": 1048588,
    "file.delete.delay.ms": 60000,
    "delete.retention.ms": 86400000,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 9223372036854775807,
    "min.cleanable.dirty.ratio": 0.5,
    "cleanup.policy": ("delete",),
    "unclean.leader.election.enable": False,
    "min.insync.replicas": 1,
    "compression.type": "producer",
    "preallocate": False,
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": 9223372036854775807,
    "message.timestamp.after.max.ms": 9223372036854775807,
}

KAFKA_TOPIC_DEFAULT_STRINGS: dict[str, str] = {
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "max.message.bytes": "1048588",
    "file.delete.delay.ms": "60000",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "cleanup.policy": "delete",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "preallocate": "false",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
}

KAFKA_BROKER_LOG_DEFAULTS: dict[str, object] = {
    "log.retention.check.interval.ms": 300000,
    "log.initial.task.delay.ms": 30000,
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "log.flush.scheduler.interval.ms": 9223372036854775807,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "producer.id.expiration.ms": 86400000,
    "producer.id.expiration.check.interval.ms": 600000,
    "transaction.partition.verification.enable": True,
    "log.cleaner.enable": True,
    "log.cleaner.threads": 1,
    "log.cleaner.dedupe.buffer.size": 134217728,
    "log.cleaner.io.buffer.size": 524288,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308,
    "log.cleaner.backoff.ms": 15000,
}


def attr(name: str) -> str:
    return name.replace(".", "_")


# ---------------------------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------------------------


def test_every_topic_setting_has_an_asserted_default():
    assert set(TOPIC_CONFIG_NAMES) == set(KAFKA_TOPIC_DEFAULTS)


@pytest.mark.parametrize("name", sorted(KAFKA_TOPIC_DEFAULTS))
def test_topic_default_equals_kafkas(name):
    config = LogConfig.defaults()
    assert getattr(config, attr(name)) == KAFKA_TOPIC_DEFAULTS[name]
    assert config.get(name) == KAFKA_TOPIC_DEFAULTS[name]


def test_default_rendering_is_kafkas():
    assert LogConfig.defaults().to_topic_props() == KAFKA_TOPIC_DEFAULT_STRINGS


def test_every_default_describes_as_default():
    entries = LogConfig.defaults().describe()
    assert [e.name for e in entries] == list(TOPIC_CONFIG_NAMES)
    assert all(e.is_default and e.source is ConfigSource.DEFAULT_CONFIG for e in entries)
    assert {e.name: e.value for e in entries} == KAFKA_TOPIC_DEFAULT_STRINGS


@pytest.mark.parametrize("name", sorted(KAFKA_BROKER_LOG_DEFAULTS))
def test_broker_log_setting_default_equals_kafkas(name):
    assert getattr(BrokerLogSettings.defaults(), attr(name)) == KAFKA_BROKER_LOG_DEFAULTS[name]


def test_broker_log_settings_cover_exactly_the_asserted_names():
    assert set(BrokerLogSettings.defaults().to_props()) == set(KAFKA_BROKER_LOG_DEFAULTS)


def test_empty_broker_config_gives_kafka_defaults():
    config = LogConfig.from_broker({})
    assert config == LogConfig.defaults()
    assert config.broker_overrides == frozenset()
    assert BrokerLogSettings.from_broker({}) == BrokerLogSettings.defaults()


# ---------------------------------------------------------------------------------------------
# Broker names and precedence
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broker_key", "raw", "topic_name", "expected"),
    [
        ("log.segment.bytes", "1048576", "segment.bytes", 1048576),
        ("log.roll.ms", "1234", "segment.ms", 1234),
        ("log.roll.hours", "2", "segment.ms", 7200000),
        ("log.roll.jitter.ms", "77", "segment.jitter.ms", 77),
        ("log.roll.jitter.hours", "3", "segment.jitter.ms", 10800000),
        ("log.index.size.max.bytes", "4096", "segment.index.bytes", 4096),
        ("log.index.interval.bytes", "100", "index.interval.bytes", 100),
        ("log.retention.ms", "5000", "retention.ms", 5000),
        ("log.retention.minutes", "2", "retention.ms", 120000),
        ("log.retention.hours", "1", "retention.ms", 3600000),
        ("log.retention.bytes", "999", "retention.bytes", 999),
        ("log.segment.delete.delay.ms", "0", "file.delete.delay.ms", 0),
        ("log.cleanup.policy", "compact,delete", "cleanup.policy", ("compact", "delete")),
        ("log.flush.interval.messages", "10", "flush.messages", 10),
        ("log.flush.interval.ms", "250", "flush.ms", 250),
        ("log.flush.scheduler.interval.ms", "2000", "flush.ms", 2000),
        ("log.preallocate", "true", "preallocate", True),
        ("log.message.timestamp.type", "LogAppendTime", "message.timestamp.type", "LogAppendTime"),
        ("log.message.timestamp.before.max.ms", "10", "message.timestamp.before.max.ms", 10),
        ("log.message.timestamp.after.max.ms", "20", "message.timestamp.after.max.ms", 20),
        ("compression.type", "zstd", "compression.type", "zstd"),
        ("message.max.bytes", "2000000", "max.message.bytes", 2000000),
        ("min.insync.replicas", "2", "min.insync.replicas", 2),
        ("unclean.leader.election.enable", "TRUE", "unclean.leader.election.enable", True),
        ("log.cleaner.delete.retention.ms", "1", "delete.retention.ms", 1),
        ("log.cleaner.min.compaction.lag.ms", "5", "min.compaction.lag.ms", 5),
        ("log.cleaner.max.compaction.lag.ms", "6", "max.compaction.lag.ms", 6),
        ("log.cleaner.min.cleanable.ratio", "0.25", "min.cleanable.dirty.ratio", 0.25),
    ],
)
def test_broker_name_sets_topic_default(broker_key, raw, topic_name, expected):
    config = LogConfig.from_broker({broker_key: raw})
    assert config.get(topic_name) == expected
    assert config.broker_overrides == {topic_name}
    sources = {e.name: e.source for e in config.describe()}
    assert sources[topic_name] is ConfigSource.STATIC_BROKER_CONFIG
    # Nothing else moved.
    others = {n: v for n, v in config.to_topic_props().items() if n != topic_name}
    assert others == {n: v for n, v in KAFKA_TOPIC_DEFAULT_STRINGS.items() if n != topic_name}


def test_roll_ms_beats_roll_hours():
    config = LogConfig.from_broker({"log.roll.hours": "5", "log.roll.ms": "1000"})
    assert config.segment_ms == 1000


def test_roll_jitter_ms_beats_roll_jitter_hours():
    config = LogConfig.from_broker({"log.roll.jitter.hours": "5", "log.roll.jitter.ms": "10"})
    assert config.segment_jitter_ms == 10


def test_retention_ms_beats_minutes_beats_hours():
    both = {"log.retention.hours": "1", "log.retention.minutes": "2"}
    assert LogConfig.from_broker(both).retention_ms == 120000
    assert LogConfig.from_broker({**both, "log.retention.ms": "42"}).retention_ms == 42
    assert LogConfig.from_broker({"log.retention.hours": 3}).retention_ms == 3 * 3600000


@pytest.mark.parametrize(
    "props",
    [
        {"log.retention.ms": "-1"},
        {"log.retention.minutes": "-1"},
        {"log.retention.hours": "-1"},
        {"log.retention.ms": "-5"},
        {"log.retention.hours": "-3"},
        {"log.retention.ms": "-1", "log.retention.hours": "5"},
        {"log.retention.minutes": "-1", "log.retention.hours": "5"},
    ],
)
def test_negative_retention_at_any_level_means_unlimited(props):
    assert LogConfig.from_broker(props).retention_ms == -1


def test_positive_retention_ms_shadows_unlimited_hours():
    props = {"log.retention.ms": "10", "log.retention.hours": "-1"}
    assert LogConfig.from_broker(props).retention_ms == 10


def test_flush_interval_ms_beats_scheduler_interval():
    props = {"log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "100"}
    assert LogConfig.from_broker(props).flush_ms == 100


def test_shadowed_synonym_is_still_validated():
    with pytest.raises(InvalidConfigError, match=r"log\.roll\.hours: Value must be at least 1"):
        LogConfig.from_broker({"log.roll.ms": "1000", "log.roll.hours": "0"})


def test_derived_value_error_names_the_broker_key():
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_broker({"log.roll.ms": "0"})
    assert (
        str(err.value) == "Invalid value 0 for configuration log.roll.ms: Value must be at least 1"
    )


def test_negative_scheduler_interval_fails_as_flush_ms():
    with pytest.raises(InvalidConfigError, match=r"log\.flush\.scheduler\.interval\.ms"):
        LogConfig.from_broker({"log.flush.scheduler.interval.ms": "-1"})


def test_non_log_broker_keys_are_ignored_even_with_odd_values():
    props = {
        "num.partitions": "abc",
        "node.id": "1",
        "listeners": "GRPC://:9192",
        # Topic-level names are not broker names; a broker config does not set them.
        "segment.bytes": "not-a-number",
        "retention.ms": "5",
    }
    assert LogConfig.from_broker(props) == LogConfig.defaults()


def test_broker_synonyms_listed_in_precedence_order():
    assert broker_synonyms("segment.ms") == ("log.roll.ms", "log.roll.hours")
    assert broker_synonyms("retention.ms") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert broker_synonyms("flush.ms") == (
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    )
    assert broker_synonyms("max.message.bytes") == ("message.max.bytes",)


def test_broker_values_accept_python_types():
    props = {"log.segment.bytes": 2048, "log.preallocate": True, "log.cleanup.policy": ["compact"]}
    config = LogConfig.from_broker(props)
    assert (config.segment_bytes, config.preallocate, config.cleanup_policy) == (
        2048,
        True,
        ("compact",),
    )


# ---------------------------------------------------------------------------------------------
# Topic overrides
# ---------------------------------------------------------------------------------------------


def test_topic_overrides_beat_broker_values():
    broker = LogConfig.from_broker({"log.segment.bytes": "5000", "log.retention.hours": "1"})
    config = LogConfig.from_topic_props({"segment.bytes": "7000"}, broker)
    assert config.segment_bytes == 7000
    assert config.retention_ms == 3600000  # broker value kept where not overridden
    sources = {e.name: e.source for e in config.describe()}
    assert sources["segment.bytes"] is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert sources["retention.ms"] is ConfigSource.STATIC_BROKER_CONFIG
    assert sources["segment.ms"] is ConfigSource.DEFAULT_CONFIG


def test_from_topic_props_without_broker_uses_kafka_defaults():
    config = LogConfig.from_topic_props({"cleanup.policy": "compact"})
    assert config == dataclasses.replace(LogConfig.defaults(), cleanup_policy=("compact",))


def test_with_overrides_accumulates_and_renders_overrides_only():
    config = LogConfig.defaults().with_overrides({"retention.ms": "-1"})
    config = config.with_overrides({"preallocate": "true"})
    assert config.topic_overrides == {"retention.ms", "preallocate"}
    assert config.to_topic_props(overrides_only=True) == {
        "retention.ms": "-1",
        "preallocate": "true",
    }


def test_with_overrides_leaves_original_untouched():
    base = LogConfig.defaults()
    base.with_overrides({"segment.bytes": "100"})
    assert base.segment_bytes == 1073741824
    assert base.topic_overrides == frozenset()


@pytest.mark.parametrize(
    "name", ["bogus", "log.segment.bytes", "message.max.bytes", "segment_bytes"]
)
def test_unknown_topic_key_is_rejected(name):
    with pytest.raises(InvalidConfigError, match=f"^Unknown topic config name: {name}$"):
        LogConfig.defaults().with_overrides({name: "1"})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        LogConfig.validate_topic_overrides({"segment.bytes": "100", name: "1"})


def test_validate_topic_overrides_accepts_valid_props():
    LogConfig.validate_topic_overrides({"segment.bytes": "100", "cleanup.policy": "compact"})


def test_config_is_frozen():
    config = LogConfig.defaults()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 5  # type: ignore[misc]


def test_direct_construction_is_validated():
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=13)
    with pytest.raises(InvalidConfigError, match="preallocate"):
        LogConfig(preallocate=1)  # type: ignore[arg-type]


def test_provenance_does_not_affect_equality():
    broker = LogConfig.from_broker({"log.segment.bytes": "5000"})
    topic = LogConfig.from_topic_props({"segment.bytes": "5000"})
    assert broker == topic
    assert hash(broker) == hash(topic)


# ---------------------------------------------------------------------------------------------
# Parsing and errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("segment.bytes", " 2048 ", 2048),
        ("segment.bytes", "+2048", 2048),
        ("segment.bytes", "14", 14),
        ("segment.bytes", "2147483647", 2147483647),
        ("retention.ms", "-1", -1),
        ("retention.bytes", "-9223372036854775808", -9223372036854775808),
        ("flush.ms", "9223372036854775807", LONG_MAX),
        ("preallocate", "TRUE", True),
        ("preallocate", " False ", False),
        ("preallocate", True, True),
        ("cleanup.policy", "compact , delete", ("compact", "delete")),
        ("cleanup.policy", "compact", ("compact",)),
        ("cleanup.policy", "", ()),
        ("cleanup.policy", ["delete", "compact"], ("delete", "compact")),
        ("min.cleanable.dirty.ratio", "1", 1.0),
        ("min.cleanable.dirty.ratio", ".25", 0.25),
        ("min.cleanable.dirty.ratio", "5e-1", 0.5),
        ("min.cleanable.dirty.ratio", "0.75d", 0.75),
        ("min.cleanable.dirty.ratio", 0, 0.0),
        ("compression.type", " lz4 ", "lz4"),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("segment.ms", 1, 1),
    ],
)
def test_value_parsing(name, raw, expected):
    value = LogConfig.from_topic_props({name: raw}).get(name)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("name", "raw", "allowed"),
    [
        # unparsable numbers
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("segment.bytes", "1.5", "Not a number of type INT"),
        ("segment.bytes", "1_000", "Not a number of type INT"),
        ("segment.bytes", "", "Not a number of type INT"),
        ("segment.ms", "1e3", "Not a number of type LONG"),
        ("retention.bytes", "lots", "Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        # outside the Java type's range
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("max.message.bytes", "-2147483649", "Not a number of type INT"),
        ("flush.ms", "9223372036854775808", "Not a number of type LONG"),
        ("segment.index.bytes", 2**31, "Not a number of type INT"),
        # outside Kafka's valid range
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("segment.jitter.ms", "-1", "Value must be at least 0"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("index.interval.bytes", "-1", "Value must be at least 0"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("flush.ms", "-1", "Value must be at least 0"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("file.delete.delay.ms", "-1", "Value must be at least 0"),
        ("delete.retention.ms", "-1", "Value must be at least 0"),
        ("min.compaction.lag.ms", "-1", "Value must be at least 0"),
        ("max.compaction.lag.ms", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "Infinity", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "NaN", "Value must be between 0 and 1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
        ("message.timestamp.after.max.ms", "-1", "Value must be at least 0"),
        # not in the valid set (case-sensitive, as in Kafka)
        ("cleanup.policy", "compact,remove", "String must be one of: compact, delete"),
        ("cleanup.policy", "Delete", "String must be one of: compact, delete"),
        ("cleanup.policy", "delete,", "String must be one of: compact, delete"),
        (
            "compression.type",
            "brotli",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("compression.type", "GZIP", "String must be one of:"),
        (
            "message.timestamp.type",
            "createtime",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        # booleans
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("unclean.leader.election.enable", "1", "Expected value to be either true or false"),
        ("preallocate", 1, "Expected value to be either true or false"),
        # wrong Python types
        ("segment.bytes", True, "Expected value to be a 32-bit integer, but it was a bool"),
        ("segment.bytes", 5.0, "Expected value to be a 32-bit integer, but it was a float"),
        ("retention.ms", 5.0, "Expected value to be a 64-bit integer (long), but it was a float"),
        ("min.cleanable.dirty.ratio", False, "Expected value to be a double, but it was a bool"),
        ("compression.type", 3, "Expected value to be a string, but it was a int"),
        ("cleanup.policy", [1], "Expected a comma separated list."),
    ],
)
def test_bad_value_raises_naming_key_value_and_allowed(name, raw, allowed):
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_topic_props({name: raw})
    message = str(err.value)
    shown = raw if isinstance(raw, str) else None
    if shown is not None and name == "cleanup.policy":
        shown = shown.split(",")[-1]  # a list error shows the offending element (last here)
    if shown is not None:
        assert message.startswith(f"Invalid value {shown} for configuration {name}: ")
    assert f" for configuration {name}: " in message
    assert message.split(f"{name}: ", 1)[1].startswith(allowed)
    assert err.value.error_name == "INVALID_CONFIG"


def test_error_message_matches_kafka_wording_exactly():
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_topic_props({"segment.bytes": "abc"})
    assert (
        str(err.value)
        == "Invalid value abc for configuration segment.bytes: Not a number of type INT"
    )
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_topic_props({"cleanup.policy": "compact,bogus"})
    assert str(err.value) == (
        "Invalid value bogus for configuration cleanup.policy: "
        "String must be one of: compact, delete"
    )
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_topic_props({"min.cleanable.dirty.ratio": "2"})
    assert str(err.value) == (
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: "
        "Value must be no more than 1"
    )


def test_invalid_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        LogConfig.from_topic_props({"segment.bytes": "x"})


@pytest.mark.parametrize(
    ("broker_key", "raw", "allowed"),
    [
        ("log.segment.bytes", "13", "Value must be at least 14"),
        ("log.roll.hours", "0", "Value must be at least 1"),
        ("log.roll.jitter.hours", "-1", "Value must be at least 0"),
        ("log.retention.minutes", "9223372036854775807", "Not a number of type INT"),
        ("log.retention.hours", "x", "Not a number of type INT"),
        ("log.retention.ms", "1.5", "Not a number of type LONG"),
        ("log.cleanup.policy", "purge", "String must be one of: compact, delete"),
        ("log.preallocate", "maybe", "Expected value to be either true or false"),
        ("message.max.bytes", "-1", "Value must be at least 0"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("compression.type", "none", "String must be one of:"),
        ("log.cleaner.min.cleanable.ratio", "3.0", "Value must be no more than 1"),
        ("log.cleaner.max.compaction.lag.ms", "0", "Value must be at least 1"),
        ("log.message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
    ],
)
def test_bad_broker_value_names_broker_key(broker_key, raw, allowed):
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_broker({broker_key: raw})
    assert str(err.value).startswith(
        f"Invalid value {raw} for configuration {broker_key}: {allowed}"
    )


# ---------------------------------------------------------------------------------------------
# Cross-field check
# ---------------------------------------------------------------------------------------------


def test_min_compaction_lag_above_max_is_rejected():
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_topic_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert str(err.value) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )


def test_compaction_lag_check_sees_broker_defaults():
    broker = LogConfig.from_broker({"log.cleaner.max.compaction.lag.ms": "100"})
    with pytest.raises(InvalidConfigError, match="conflict topic config setting"):
        LogConfig.validate_topic_overrides({"min.compaction.lag.ms": "101"}, broker)
    LogConfig.validate_topic_overrides({"min.compaction.lag.ms": "100"}, broker)


def test_compaction_lag_check_applies_to_broker_config():
    with pytest.raises(InvalidConfigError, match="conflict topic config setting"):
        LogConfig.from_broker(
            {"log.cleaner.min.compaction.lag.ms": "7", "log.cleaner.max.compaction.lag.ms": "6"}
        )


def test_retention_bytes_below_segment_bytes_is_allowed():
    # Kafka does not relate the two; neither do we.
    config = LogConfig.from_topic_props({"retention.bytes": "10", "segment.bytes": "100000"})
    assert config.retention_bytes == 10


# ---------------------------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------------------------


def _value_strategy(name: str) -> st.SearchStrategy[object]:
    key = TOPIC_CONFIG_KEYS[name]
    if key.one_of is not None and key.type.value == "LIST":
        return st.lists(st.sampled_from(key.one_of), max_size=3).map(tuple)
    if key.one_of is not None:
        return st.sampled_from(key.one_of)
    if name.endswith(".replication.throttled.replicas"):
        pairs = st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]}:{t[1]}")
        return st.one_of(st.just(("*",)), st.lists(pairs, max_size=3, unique=True).map(tuple))
    if key.type.value == "BOOLEAN":
        return st.booleans()
    if key.type.value == "DOUBLE":
        return st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
    hi = 2**31 - 1 if key.type.value == "INT" else 2**63 - 1
    lo = key.at_least if key.at_least is not None else -(2**63)
    return st.integers(min_value=lo, max_value=hi)


@st.composite
def overrides(draw: st.DrawFn) -> dict[str, object]:
    names = draw(st.lists(st.sampled_from(TOPIC_CONFIG_NAMES), unique=True))
    props = {name: draw(_value_strategy(name)) for name in names}
    lags = ("min.compaction.lag.ms", "max.compaction.lag.ms")
    lo = props.get(lags[0], 0)
    hi = props.get(lags[1], LONG_MAX)
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        props[lags[0]], props[lags[1]] = hi, lo
    return props


@settings(max_examples=150, deadline=None)
@given(overrides())
def test_round_trip_through_topic_props(props):
    config = LogConfig.from_topic_props(props)
    rendered = config.to_topic_props()
    assert all(isinstance(v, str) for v in rendered.values())
    again = LogConfig.from_topic_props(rendered)
    assert again == config
    assert again.to_topic_props() == rendered
    only = LogConfig.from_topic_props(config.to_topic_props(overrides_only=True))
    assert only == config


def test_round_trip_of_defaults_and_of_broker_settings():
    config = LogConfig.defaults()
    assert LogConfig.from_topic_props(config.to_topic_props()) == config
    settings_ = BrokerLogSettings.from_broker({"log.initial.task.delay.ms": "10"})
    assert BrokerLogSettings.from_broker(settings_.to_props()) == settings_


# ---------------------------------------------------------------------------------------------
# Java rendering of doubles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.5, "0.5"),
        (1.0, "1.0"),
        (0.0, "0.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1e-5, "1.0E-5"),
        (1.25e-7, "1.25E-7"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (-2.5e10, "-2.5E10"),
        (float("inf"), "Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_java_double_str(value, java):
    assert java_double_str(value) == java


def test_tiny_ratio_renders_and_reparses():
    config = LogConfig.from_topic_props({"min.cleanable.dirty.ratio": "0.00001"})
    assert config.to_topic_props()["min.cleanable.dirty.ratio"] == "1.0E-5"
    assert LogConfig.from_topic_props(config.to_topic_props()) == config


# ---------------------------------------------------------------------------------------------
# Derived values
# ---------------------------------------------------------------------------------------------


def test_cleanup_policy_flags():
    assert (LogConfig().delete, LogConfig().compact) == (True, False)
    both = LogConfig(cleanup_policy=("compact", "delete"))
    assert (both.delete, both.compact) == (True, True)
    neither = LogConfig(cleanup_policy=())
    assert (neither.delete, neither.compact) == (False, False)


def test_max_segment_ms_uses_max_compaction_lag_for_compacted_topics():
    config = LogConfig(segment_ms=1000, max_compaction_lag_ms=300)
    assert config.max_segment_ms == 1000
    compacted = dataclasses.replace(config, cleanup_policy=("compact",))
    assert compacted.max_segment_ms == 300
    assert dataclasses.replace(compacted, max_compaction_lag_ms=5000).max_segment_ms == 1000


def test_init_file_size_follows_preallocate():
    assert LogConfig(segment_bytes=4096).init_file_size == 0
    assert LogConfig(segment_bytes=4096, preallocate=True).init_file_size == 4096


def test_random_segment_jitter():
    assert LogConfig().random_segment_jitter(random.Random(1)) == 0
    config = LogConfig(segment_ms=1000, segment_jitter_ms=5000)
    draws = [config.random_segment_jitter(random.Random(seed)) for seed in range(200)]
    assert all(0 <= d < 1000 for d in draws)  # bounded by min(jitter, segment.ms)
    assert len(set(draws)) > 50
    # Deterministic for a seeded generator: abs(int32) % bound, as Kafka computes it.
    r = random.Random(7).getrandbits(32)
    signed = r - 2**32 if r >= 2**31 else r
    assert config.random_segment_jitter(random.Random(7)) == abs(signed) % 1000


# ---------------------------------------------------------------------------------------------
# Broker-only settings
# ---------------------------------------------------------------------------------------------


def test_broker_log_settings_from_broker():
    settings_ = BrokerLogSettings.from_broker(
        {
            "log.retention.check.interval.ms": "1000",
            "producer.id.expiration.ms": 5,
            "replica.high.watermark.checkpoint.interval.ms": " 250 ",
            "log.segment.bytes": "not mine",
        }
    )
    assert settings_.log_retention_check_interval_ms == 1000
    assert settings_.producer_id_expiration_ms == 5
    assert settings_.replica_high_watermark_checkpoint_interval_ms == 250
    assert settings_.log_initial_task_delay_ms == 30000


@pytest.mark.parametrize(
    ("name", "raw", "allowed"),
    [
        ("log.retention.check.interval.ms", "0", "Value must be at least 1"),
        ("log.initial.task.delay.ms", "-1", "Value must be at least 0"),
        ("log.flush.offset.checkpoint.interval.ms", "2147483648", "Not a number of type INT"),
        ("log.flush.start.offset.checkpoint.interval.ms", "-1", "Value must be at least 0"),
        ("producer.id.expiration.ms", "0", "Value must be at least 1"),
        ("producer.id.expiration.check.interval.ms", "soon", "Not a number of type INT"),
        ("replica.high.watermark.checkpoint.interval.ms", "1.0", "Not a number of type LONG"),
    ],
)
def test_bad_broker_log_setting(name, raw, allowed):
    with pytest.raises(InvalidConfigError) as err:
        BrokerLogSettings.from_broker({name: raw})
    assert str(err.value) == f"Invalid value {raw} for configuration {name}: {allowed}"
