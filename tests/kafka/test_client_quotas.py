"""Client quotas on the Kafka listener, against three real nodes: kafka-python's
client sends DescribeClientQuotas / AlterClientQuotas (its own protocol classes: no
Python client has an admin call for them), and a confluent-kafka producer and consumer
under a quota are throttled (throttle_time_ms in the answers, the channel muted) so
that their throughput stays near the quota."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

TIMEOUT_S = 30.0


def send(admin: KafkaAdminClient, request: object) -> object:
    """A request through kafka-python's admin client to any broker."""
    return admin._manager.run(admin._manager.send, request)


def alter(admin: KafkaAdminClient, entity: dict[str, str | None], ops: dict, validate=False):
    e = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            e(
                entity=[e.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[
                    e.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                    for k, v in ops.items()
                ],
            )
        ],
        validate_only=validate,
    )
    return send(admin, request).entries[0]


def describe(admin: KafkaAdminClient, components: list[tuple[str, int, str | None]], strict=False):
    c = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[c(entity_type=t, match_type=m, match=x) for t, m, x in components],
        strict=strict,
    )
    return send(admin, request)


def as_dict(response) -> dict[tuple, dict[str, float]]:
    return {
        tuple(sorted((d.entity_type, d.entity_name) for d in e.entity)): {
            v.key: v.value for v in e.values
        }
        for e in response.entries or ()
    }


def test_quotas_are_altered_and_described_as_kafka_does(kafka_cluster):
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        r = alter(admin, {"user": "alice"}, {"producer_byte_rate": 1024, "request_percentage": 50})
        assert (r.error_code, r.error_message) == (0, None)
        r = alter(admin, {"user": "alice", "client-id": None}, {"consumer_byte_rate": 2048})
        assert r.error_code == 0
        r = alter(admin, {"client-id": "app"}, {"controller_mutation_rate": 2.5})
        assert r.error_code == 0
        r = alter(admin, {"user": None}, {"producer_byte_rate": 4096})
        assert r.error_code == 0

        # Exact user: only alice's entities (non-strict: with a client-id too).
        got = as_dict(describe(admin, [("user", 0, "alice")]))
        assert got == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
        }
        # Strict: the user-only entity.
        got = as_dict(describe(admin, [("user", 0, "alice")], strict=True))
        assert list(got) == [(("user", "alice"),)]
        # The default user; any client-id.
        assert as_dict(describe(admin, [("user", 1, None)])) == {
            (("user", None),): {"producer_byte_rate": 4096.0}
        }
        got = as_dict(describe(admin, [("client-id", 2, None)]))
        assert set(got) == {(("client-id", None), ("user", "alice")), (("client-id", "app"),)}

        # Removing the last key removes the entity.
        assert alter(admin, {"user": None}, {"producer_byte_rate": None}).error_code == 0
        assert as_dict(describe(admin, [("user", 1, None)])) == {}

        # validate_only changes nothing.
        r = alter(admin, {"user": "bob"}, {"producer_byte_rate": 10}, validate=True)
        assert r.error_code == 0
        assert as_dict(describe(admin, [("user", 0, "bob")])) == {}

        # Kafka's refusals, naming what was wrong.
        bad = [
            ({"user": "alice"}, {"producer_byte_rate": 1.5}, "cannot be a fractional value"),
            ({"user": "alice"}, {"producer_byte_rate": -1}, "must be greater than 0"),
            ({"user": "alice"}, {"no_such_quota": 1}, "Invalid configuration key no_such_quota"),
            ({"group": "g"}, {"producer_byte_rate": 1}, "Unhandled client quota entity type"),
            ({"user": ""}, {"producer_byte_rate": 1}, "Empty user not supported"),
            ({"ip": "127.0.0.1"}, {"connection_creation_rate": 1}, "not supported by seglog"),
        ]
        for entity, ops, message in bad:
            r = alter(admin, entity, ops)
            assert r.error_code == 42, (entity, ops, r)  # INVALID_REQUEST
            assert message in r.error_message, r.error_message
        r = describe(admin, [("user", 0, None)])
        assert r.error_code == 42 and "MATCH_TYPE_EXACT" in r.error_message
        r = describe(admin, [("user", 1, None), ("user", 2, None)])
        assert r.error_code == 42 and "more than once" in r.error_message
    finally:
        for entity in ({"user": "alice"}, {"user": "alice", "client-id": None}):
            alter(
                admin,
                entity,
                dict.fromkeys(
                    ("producer_byte_rate", "request_percentage", "consumer_byte_rate"), None
                ),
            )
        alter(admin, {"client-id": "app"}, {"controller_mutation_rate": None})
        admin.close()


def test_a_producer_over_its_quota_is_throttled_near_the_quota(kafka_cluster):
    topic, client_id, quota = "quota-produce", "quota-producer", 100_000
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    kafka_cluster.wait("topic known", lambda: kafka_cluster.known_everywhere(topic, 1))
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        assert alter(kp, {"client-id": client_id}, {"producer_byte_rate": quota}).error_code == 0
        # Every node applies it from the metadata (the leader is the one that counts).
        time.sleep(1.0)
        throttles: list[int] = []
        p = Producer(
            {
                "bootstrap.servers": kafka_cluster.kafka_bootstrap,
                "client.id": client_id,
                "acks": 1,
                "linger.ms": 5,
                "batch.size": 65536,
                "queue.buffering.max.kbytes": 1024,
                "statistics.interval.ms": 0,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        acked = 0

        def delivered(err, msg) -> None:
            nonlocal acked
            if err is None:
                acked += len(msg.value())

        value = b"x" * 1000
        started = time.monotonic()
        seconds = 10.0
        while time.monotonic() - started < seconds:
            try:
                p.produce(topic, value, on_delivery=delivered)
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        elapsed = time.monotonic() - started
        p.purge()
        p.flush(30)
        assert throttles and max(throttles) > 0, throttles
        # Kafka's rate counts at least quota.window.num - 1 (10) one-second windows, so
        # a new sensor lets about ten seconds' worth through before it throttles.
        allowed = quota * (elapsed + 10)
        assert acked <= 1.5 * allowed, (acked, allowed)
        assert acked >= 0.3 * quota * elapsed, (acked, quota * elapsed)
    finally:
        alter(kp, {"client-id": client_id}, {"producer_byte_rate": None})
        kp.close()


def test_a_consumer_over_its_quota_is_throttled_near_the_quota(kafka_cluster):
    topic, client_id, quota = "quota-fetch", "quota-consumer", 50_000
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    kafka_cluster.wait("topic known", lambda: kafka_cluster.known_everywhere(topic, 1))
    # Batches well below what a quota window holds (50 KB/s x 10 s): a batch larger
    # than that would be throttled on every fetch, in Kafka as here.
    p = Producer(
        {"bootstrap.servers": kafka_cluster.kafka_bootstrap, "linger.ms": 20, "batch.size": 16384}
    )
    total = 6_000
    for i in range(total):
        p.produce(topic, b"y" * 1000)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(TIMEOUT_S) == 0
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        assert alter(kp, {"client-id": client_id}, {"consumer_byte_rate": quota}).error_code == 0
        time.sleep(1.0)
        throttles: list[int] = []
        c = Consumer(
            {
                "bootstrap.servers": kafka_cluster.kafka_bootstrap,
                "client.id": client_id,
                "group.id": "quota-consumers",
                "auto.offset.reset": "earliest",
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        c.subscribe([topic])
        got = 0
        started = time.monotonic()
        seconds = 10.0
        while time.monotonic() - started < seconds and got < total * 1000:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += len(m.value())
        elapsed = time.monotonic() - started
        c.close()
        allowed = quota * (elapsed + 10)
        assert got <= 1.5 * allowed, (got, allowed)
        assert got >= 0.3 * quota * elapsed, (got, quota * elapsed)
        assert throttles and max(throttles) > 0, throttles
    finally:
        alter(kp, {"client-id": client_id}, {"consumer_byte_rate": None})
        kp.close()


def seglog_configs(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", "configs", "--bootstrap-server", cluster.bootstrap]
        + list(args),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_seglog_configs_alters_and_describes_quotas_as_kafka_configs_does(kafka_cluster):
    users = ("--entity-type", "users", "--entity-name", "carol")
    clients = ("--entity-type", "clients", "--entity-name", "etl")
    done = seglog_configs(
        kafka_cluster, "--alter", *users, "--add-config", "producer_byte_rate=1048576"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating config for user carol."
    done = seglog_configs(
        kafka_cluster, "--alter", *users, *clients, "--add-config", "request_percentage=50"
    )
    assert done.returncode == 0, done.stderr
    done = seglog_configs(
        kafka_cluster,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "consumer_byte_rate=2048",
    )
    assert done.stdout.strip() == "Completed updating default config for clients in the cluster."

    done = seglog_configs(kafka_cluster, "--describe", *users)
    assert done.returncode == 0, done.stderr
    assert "Quota configs for user-principal 'carol' are producer_byte_rate=1048576.0" in (
        done.stdout
    )
    done = seglog_configs(kafka_cluster, "--describe", *users, *clients)
    assert done.stdout.strip() == (
        "Quota configs for user-principal 'carol', client-id 'etl' are request_percentage=50.0"
    )
    done = seglog_configs(kafka_cluster, "--describe", "--entity-type", "clients")
    assert "Quota configs for the default client-id are consumer_byte_rate=2048.0" in done.stdout

    # The same quotas through Kafka's API.
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        got = as_dict(describe(admin, [("user", 0, "carol")]))
        assert got[(("user", "carol"),)] == {"producer_byte_rate": 1048576.0}
    finally:
        admin.close()

    # Kafka's refusal, named; then the deletions.
    done = seglog_configs(
        kafka_cluster, "--alter", *users, "--add-config", "producer_byte_rate=1.5"
    )
    assert done.returncode == 1 and "cannot be a fractional value" in done.stderr
    for entity, key in (
        (users, "producer_byte_rate"),
        ((*users, *clients), "request_percentage"),
        (("--entity-type", "clients", "--entity-default"), "consumer_byte_rate"),
    ):
        done = seglog_configs(kafka_cluster, "--alter", *entity, "--delete-config", key)
        assert done.returncode == 0, done.stderr
    done = seglog_configs(kafka_cluster, "--describe", "--entity-type", "users")
    assert "carol" not in done.stdout


def test_controller_mutations_are_throttled_and_refused_when_strict(kafka_cluster):
    from kafka.protocol.admin import CreateTopicsRequest

    client_id = "mutator"
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap, client_id=client_id)

    def create(name: str, partitions: int, version: int) -> Any:
        t = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(
            topics=[
                t(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=10_000,
            validate_only=False,
        )
        request.API_VERSION = version  # the version the test needs
        return admin._manager.run(admin._manager.send, request)

    try:
        # 1 partition a second: a full bucket holds 11 (quota.window.num x 1 s).
        r = alter(admin, {"client-id": client_id}, {"controller_mutation_rate": 1})
        assert r.error_code == 0
        time.sleep(1.0)
        first = create("mutations-a", 10, 7)
        assert first.topics[0].error_code == 0
        second = create("mutations-b", 5, 7)  # taken: the bucket goes to -4
        assert second.topics[0].error_code == 0
        third = create("mutations-c", 1, 7)  # strict (v6+): refused while below zero
        assert third.topics[0].error_code == 89, third  # THROTTLING_QUOTA_EXCEEDED
        assert third.topics[0].error_message == "The throttling quota has been exceeded."
        assert third.throttle_time_ms > 0
        for name, partitions in (("mutations-a", 10), ("mutations-b", 5)):
            kafka_cluster.wait(
                name, lambda n=name, p=partitions: kafka_cluster.known_everywhere(n, p)
            )
        assert "mutations-c" not in admin.list_topics()
    finally:
        alter(admin, {"client-id": client_id}, {"controller_mutation_rate": None})
        admin.close()


def test_a_client_that_ignores_its_throttle_is_muted(kafka_cluster):
    """KIP-219: the broker mutes the channel for the throttle time it answered, so a
    client that sends again at once is not read until then."""
    import socket
    import struct

    from kafka.protocol.metadata import ApiVersionsRequest
    from kafka.protocol.producer import ProduceRequest

    from seglog.harness.kafka_cluster import response_class
    from seglog.storage.record_batch import NewRecord, build_batch

    topic, client_id = "quota-mute", "mute-check"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    kafka_cluster.wait("topic known", lambda: kafka_cluster.known_everywhere(topic, 1))
    leader = kafka_cluster.wait("a leader", lambda: kafka_cluster.leader_of(topic))
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    sock = socket.create_connection(("127.0.0.1", kafka_cluster.kafka_ports[leader]), timeout=30)
    try:
        # 1,000 B/s: a 12 kB produce measures about 1,200 B/s over the ten windows a new
        # sensor counts, so it is throttled for about two seconds.
        assert alter(kp, {"client-id": client_id}, {"producer_byte_rate": 1000}).error_code == 0
        time.sleep(1.0)

        def call(request: Any, cid: int) -> Any:
            request.with_header(correlation_id=cid, client_id=client_id)
            sock.sendall(bytes(request.encode(header=True, framed=True)))
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            frame = sock.recv(size, socket.MSG_WAITALL)
            flexible = request.flexible_version_q(request.API_VERSION) and request.API_KEY != 18
            body = frame[5:] if flexible else frame[4:]
            return response_class(request).decode(body, version=request.API_VERSION)

        records = build_batch([NewRecord(b"x" * 12_000)], base_offset=0)
        R = ProduceRequest
        produce = R[9](
            transactional_id=None,
            acks=1,
            timeout_ms=10_000,
            topic_data=[
                R.TopicProduceData(
                    name=topic,
                    partition_data=[
                        R.TopicProduceData.PartitionProduceData(index=0, records=records)
                    ],
                )
            ],
        )
        answer = call(produce, 1)
        assert answer.responses[0].partition_responses[0].error_code == 0
        throttle_ms = answer.throttle_time_ms
        assert 1_000 <= throttle_ms <= 4_000, throttle_ms
        sent = time.monotonic()
        call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), 2)
        waited_ms = (time.monotonic() - sent) * 1000
        # Muted for the throttle time (a generous bound: the mute began when the
        # answer was queued, a little before the client read it).
        assert waited_ms >= throttle_ms * 0.5, (waited_ms, throttle_ms)
    finally:
        sock.close()
        alter(kp, {"client-id": client_id}, {"producer_byte_rate": None})
        kp.close()
