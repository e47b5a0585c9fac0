"""DescribeConfigs' entries (node/kafka/config_entries.py), pure: the precedence of the
layers, the KIP-226 synonyms and Kafka's source ids and types."""

from __future__ import annotations

from seglog.node.kafka import config_entries as ce
from seglog.storage.log_config import LogConfig


def by_name(entries: list[ce.Entry]) -> dict[str, ce.Entry]:
    return {e.name: e for e in entries}


def test_a_broker_config_takes_its_highest_layer_and_lists_every_synonym():
    layers = ce.Layers(
        dynamic={"log.retention.ms": "1000"},
        dynamic_default={"log.retention.ms": "2000"},
        static={"log.retention.hours": "24", "sasl.jaas.config": "secret", "x.unknown": "1"},
    )
    entries = by_name(
        ce.broker_entries(layers, {"log.retention.ms"}, lambda n: n.endswith("jaas.config"))
    )
    ms = entries["log.retention.ms"]
    assert (ms.value, ms.source, ms.read_only, ms.config_type) == ("1000", 2, False, ce.LONG)
    assert [(s.name, s.value, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", "1000", 2),
        ("log.retention.ms", "2000", 3),
        ("log.retention.hours", "24", 4),
        ("log.retention.hours", "168", 5),
    ]
    hours = entries["log.retention.hours"]
    assert (hours.value, hours.source, hours.read_only) == ("24", 4, True)
    jaas = entries["sasl.jaas.config"]
    assert jaas.value is None and jaas.sensitive and jaas.config_type == ce.PASSWORD
    assert entries["x.unknown"].config_type == ce.UNKNOWN  # given, but no config defines it
    listeners = entries["advertised.listeners"]
    assert (listeners.value, listeners.source, listeners.config_type) == (None, 5, ce.LIST)


def test_a_topic_config_is_its_override_else_the_broker_layer_else_the_default():
    effective = LogConfig().to_topic_props()
    layers = ce.Layers(dynamic={}, dynamic_default={"log.retention.bytes": "100"}, static={})
    entries = by_name(ce.topic_entries(effective, {"retention.ms": "5"}, layers))
    assert entries["retention.ms"].source == ce.TOPIC_CONFIG
    assert entries["retention.bytes"].source == ce.DYNAMIC_DEFAULT_BROKER
    assert [(s.name, s.source) for s in entries["retention.bytes"].synonyms] == [
        ("log.retention.bytes", 3),
        ("log.retention.bytes", 5),
    ]
    seg = entries["segment.bytes"]
    assert (seg.source, seg.config_type, seg.documentation != "") == (5, ce.INT, True)
    assert all(e.documentation for e in entries.values())


def test_the_cluster_default_resource_lists_only_the_dynamic_defaults():
    entries = ce.default_broker_entries({"log.retention.ms": "7"}, lambda _n: False)
    assert [(e.name, e.value, e.source) for e in entries] == [("log.retention.ms", "7", 3)]
