"""Kafka's ClientQuotaManager without I/O (node/client_quota_manager.py): the quota
precedence, the windowed rate, the throttle time and the metric families, with time
as an input."""

from __future__ import annotations

from seglog.node.client_quota_manager import (
    ClientQuotaManager,
    ClientQuotas,
    QuotaWindows,
    Rate,
    resolve,
)
from seglog.node.metrics import _quota_families

U, C = "user", "client-id"


def test_the_quota_is_found_in_kafkas_order_and_names_the_sensor():
    quotas = {
        ((C, None),): {"producer_byte_rate": 8.0},
        ((C, "app"),): {"producer_byte_rate": 7.0},
        ((U, None),): {"producer_byte_rate": 6.0},
        ((C, None), (U, None)): {"producer_byte_rate": 5.0},
        ((C, "app"), (U, None)): {"producer_byte_rate": 4.0},
        ((U, "alice"),): {"producer_byte_rate": 3.0},
        ((C, None), (U, "alice")): {"producer_byte_rate": 2.0},
        ((C, "app"), (U, "alice")): {"producer_byte_rate": 1.0},
    }
    key = "producer_byte_rate"
    assert resolve(quotas, key, "alice", "app") == (("alice", "app"), 1.0)
    expected = [
        (("alice", "app"), 2.0),
        (("alice", ""), 3.0),
        (("alice", "app"), 4.0),
        (("alice", "app"), 5.0),
        (("alice", ""), 6.0),
        (("", "app"), 7.0),
        (("", "app"), 8.0),
        (("", "app"), None),
    ]
    levels = sorted(quotas, key=lambda e: quotas[e][key])
    for entity, want in zip(levels, expected, strict=True):
        del quotas[entity]
        assert resolve(quotas, key, "alice", "app") == want, entity


def test_the_rate_counts_at_least_the_windows_of_a_full_sample_set():
    r = Rate(QuotaWindows(num=11, size_s=1))
    r.record(10_000, 0)
    assert r.window_size_ms(0) == 10_000  # a young sensor: 10 whole windows
    assert r.measure(0) == 1_000
    for t in range(1, 30):
        r.record(1_000, t * 1000)
    # 11 samples hold 19 s..29 s: 11,000 bytes, over the 10 s since the oldest
    # sample began (Kafka's Rate counts the current sample's elapsed part only).
    assert r.measure(29_000) == 1_100


def test_throttle_time_is_kafkas_and_the_request_quota_caps_it_at_a_window():
    quotas = {((C, "app"),): {"producer_byte_rate": 1_000.0, "request_percentage": 10.0}}
    produce = ClientQuotaManager("Produce")
    produce.update(quotas)
    assert produce.record("ANONYMOUS", "app", 10_000, 0) == 0  # 1,000 B/s: at the bound
    # 20,000 over 10 s = 2,000 B/s: (2000 - 1000) / 1000 x 10 s = 10 s.
    assert produce.record("ANONYMOUS", "app", 10_000, 0) == 10_000
    assert produce.record("ANONYMOUS", "other", 10_000_000, 0) == 0  # no quota for it
    request = ClientQuotaManager("Request")
    request.update(quotas)
    assert request.record("ANONYMOUS", "app", 1_000.0, 0) == 1_000  # capped at one window
    assert produce.max_value_in_window("ANONYMOUS", "app") == 10_000
    assert produce.max_value_in_window("ANONYMOUS", "other") is None
    produce.update({})
    assert not produce.enabled and produce.record("ANONYMOUS", "app", 1e9, 1) == 0


def test_a_client_honouring_its_throttle_stays_near_the_quota():
    quotas = ClientQuotas()
    quotas.update({((U, "alice"),): {"producer_byte_rate": 1_000.0}})
    now = sent = 0
    while now < 120_000:
        throttle = quotas.produce.record("alice", "any", 500, now)
        sent += 500
        now += 50 + throttle
    assert 1_000 <= sent / 120 <= 1_150


def test_the_metrics_carry_kafkas_names_and_tags():
    quotas = ClientQuotas()
    quotas.update({((C, "app"),): {"consumer_byte_rate": 100.0}})
    at = 1_000
    throttle = quotas.fetch.record("bob", "app", 100_000, at)
    quotas.fetch.throttled("bob", "app", throttle, at)
    families = {f.name: f for f in _quota_families(quotas, at)}
    assert set(families) == {
        "kafka_server_produce_byte_rate",
        "kafka_server_produce_throttle_time",
        "kafka_server_fetch_byte_rate",
        "kafka_server_fetch_throttle_time",
        "kafka_server_request_request_time",
        "kafka_server_request_throttle_time",
        "kafka_server_controllermutation_mutation_rate",
        "kafka_server_controllermutation_throttle_time",
    }
    (sample,) = families["kafka_server_fetch_throttle_time"].samples
    assert sample.labels == {"user": "", "client_id": "app"} and sample.value == throttle > 0


def test_controller_mutations_draw_from_a_token_bucket_strict_or_permissive():
    m = ClientQuotaManager("ControllerMutation", QuotaWindows(num=11, size_s=1))
    m.update({((C, "app"),): {"controller_mutation_rate": 2.0}})
    # A full bucket holds 2 x 11 x 1 = 22 partitions; the 30 taken leave it at -8.
    assert m.record_mutation("u", "app", 30, 0, strict=True) == (True, 0)
    # Strict: refused while below zero, for as long as 8 tokens take at 2/s.
    assert m.record_mutation("u", "app", 1, 0, strict=True) == (False, 4_000)
    assert m.record_mutation("u", "app", 1, 4_000, strict=True) == (True, 0)  # back at 0: -1
    # Permissive: taken, and throttled for what it owes (6 tokens: 3 s).
    assert m.record_mutation("u", "app", 5, 4_000, strict=False) == (True, 3_000)
    assert m.record_mutation("u", "other", 1_000, 0, strict=True) == (True, 0)


def test_quota_and_group_config_records_survive_a_metadata_snapshot():
    from seglog.controller.metadata_image import MetadataImage
    from seglog.controller.metadata_records import (
        GROUP_RESOURCE,
        ClientQuotaRecord,
        ConfigRecord,
        decode_entry,
        encode_entry,
    )

    image = MetadataImage()
    records = [
        ClientQuotaRecord(((C, None), (U, "alice")), "producer_byte_rate", 1024.0),
        ClientQuotaRecord(((U, None),), "request_percentage", 12.5),
        ClientQuotaRecord(((U, None),), "request_percentage", 0.0, remove=True),
        ConfigRecord("g1", "consumer.session.timeout.ms", "50000", GROUP_RESOURCE),
    ]
    for r in decode_entry(encode_entry(records)):  # through the metadata log's JSON
        image.apply(r)
    assert image.client_quotas == {((C, None), (U, "alice")): {"producer_byte_rate": 1024.0}}
    assert image.group_configs == {"g1": {"consumer.session.timeout.ms": "50000"}}
    again = MetadataImage()
    for r in image.to_records():
        again.apply(r)
    assert again.canonical() == image.canonical()
