"""Re-authentication of seglog's clients on gRPC (client/sasl.py), against one real
node whose session tokens live LIFETIME_S (`connections.max.reauth.ms`): a producer
and a group consumer keep working across several token lifetimes, logging in again
before each token ends; a call whose token the node refuses anyway (expired, or voided
by a credential change) logs in again once and is sent once more, one login for all
the threads that saw the refusal; tokens voided in the middle of an idempotent
producer's sends lose and duplicate nothing; and after a password change the old
client fails with SASL_AUTHENTICATION_FAILED naming the user and mechanism, without
retrying, while the new password works."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from test_grpc_sasl import ALICE, Cluster

from seglog.client.admin import Admin
from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.client.sasl import SaslAuthenticationFailedError, SaslLogin, token_channel
from seglog.proto import client_pb2, client_pb2_grpc

LIFETIME_S = 3.0
ALICE_NEW = {**ALICE, "sasl_plain_password": "alice-new"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("reauth"),
        {"connections.max.reauth.ms": str(int(LIFETIME_S * 1000))},
    )
    c.node.start()
    try:
        for topic in ("reauth-a", "reauth-b", "reauth-c"):
            c.cli("topics", "--create", "--topic", topic, "--partitions", "3")
        set_password(c, "alice-secret")
        c.cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "Write",
            "--operation", "Read", "--operation", "Describe", "--topic", "reauth-",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        c.cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
            "--group", "reauth-", "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        c.cli("acls", "--add", "--allow-principal", "User:alice", "--operation",
              "IdempotentWrite", "--cluster")  # fmt: skip
        yield c
    finally:
        c.node.stop()


def set_password(c: Cluster, password: str) -> None:
    """A new SCRAM credential (a new salt even for the same password): every token
    alice holds is void once the node has applied it."""
    c.cli(
        "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
        "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={password}]",
    )  # fmt: skip


def log_count(c: Cluster, *needles: str) -> int:
    lines = c.node.log_path.read_text().splitlines()
    return sum(all(n in line for n in needles) for line in lines)


def consume_all(c: Cluster, topic: str, group: str, expected: int) -> list[tuple[int, bytes]]:
    """(partition, value) of every record in `topic`, in each partition's order."""
    consumer = Consumer(
        topic,
        bootstrap_servers=c.node.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **ALICE,
    )
    got: list[tuple[int, bytes]] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.partition, r.value) for r in records]
    finally:
        consumer.close()
    return got


def in_partition_order(got: list[tuple[int, bytes]], partition: int) -> list[int]:
    return [int(v.split(b"-")[1]) for p, v in got if p == partition]


def test_clients_keep_working_across_several_token_lifetimes(cluster):
    """(a) Producer and group consumer for 3.5 lifetimes: no error, every record
    once, and each client logged in again several times."""
    logins_before = log_count(cluster, "grpc_authenticated", "User:alice")
    expired_before = log_count(cluster, "session token: expired")
    producer = Producer(cluster.node.bootstrap, linger_ms=5, **ALICE)
    consumer = Consumer(
        "reauth-a",
        bootstrap_servers=cluster.node.bootstrap,
        group_id="reauth-a-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **ALICE,
    )
    sent: list[bytes] = []
    got: list[bytes] = []
    futures = []
    try:
        deadline = time.monotonic() + 3.5 * LIFETIME_S
        while time.monotonic() < deadline:
            for _ in range(5):
                value = f"a-{len(sent)}".encode()
                futures.append(producer.send("reauth-a", value, key=value))
                sent.append(value)
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=30)  # raises if a send failed
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        consumer.commit()
    finally:
        producer.close()
        consumer.close()
    assert sorted(got) == sorted(sent) and len(set(got)) == len(got)
    # Two clients, each a login at the start and one per lifetime after.
    logins = log_count(cluster, "grpc_authenticated", "User:alice") - logins_before
    assert logins >= 2 + 2 * 2, f"only {logins} logins in {3.5 * LIFETIME_S:.0f}s"
    # They logged in again before the tokens ended: (next to) no call carried an
    # expired one (without the early login each client's calls would, every lifetime;
    # one is allowed for a call that a loaded machine delayed past the 5% margin).
    assert log_count(cluster, "session token: expired") - expired_before <= 1


def test_a_refused_token_logs_in_again_once_and_the_call_is_sent_again(cluster):
    """The reactive path: a login whose clock stands still never renews early, so
    its calls reach the node with an expired token."""
    request = client_pb2.MetadataRequest(all_topics=True)
    expired_before = log_count(cluster, "grpc_authentication_failed", "expired")
    with grpc.insecure_channel(cluster.node.bootstrap) as channel:
        login = SaslLogin(channel, "SCRAM-SHA-256", "alice", "alice-secret", clock=lambda: 0.0)
        stub = client_pb2_grpc.SegLogStub(token_channel(channel, login))
        assert "reauth-a" in {t.name for t in stub.Metadata(request, timeout=10).topics}
        assert login.logins == 1
        time.sleep(LIFETIME_S + 0.3)
        stub.Metadata(request, timeout=10)  # a blocking call
        assert login.logins == 2
        time.sleep(LIFETIME_S + 0.3)
        stub.Metadata.future(request, timeout=10).result()  # a future
        assert login.logins == 3
        time.sleep(LIFETIME_S + 0.3)
        # Eight threads see the same token refused: one login serves them all.
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _i: stub.Metadata(request, timeout=10), range(8)))
        assert len(answers) == 8 and login.logins == 4
    assert log_count(cluster, "grpc_authentication_failed", "expired") - expired_before >= 3


def test_tokens_voided_mid_produce_lose_and_duplicate_nothing(cluster):
    """An idempotent producer with requests in flight while alice's credential is set
    again three times (same password, new salt): its calls are refused, sent again
    after a new login, and every record is in the log exactly once, in order."""
    voided = ("grpc_authentication_failed", "SegLog/Produce", "changed or deleted")
    voided_before = log_count(cluster, *voided)
    producer = Producer(
        cluster.node.bootstrap,
        linger_ms=2,
        enable_idempotence=True,
        max_in_flight_requests_per_connection=5,
        **ALICE,
    )
    stop = threading.Event()
    futures: list = []

    def produce() -> None:
        i = 0
        while not stop.is_set():
            value = f"b-{i}".encode()
            futures.append(producer.send("reauth-b", value, partition=i % 3))
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        for _ in range(3):
            time.sleep(0.7)
            set_password(cluster, "alice-secret")
        time.sleep(0.7)
    finally:
        stop.set()
        thread.join()
        producer.flush(timeout=60)
        producer.close()
    offsets = [f.get(timeout=30) for f in futures]  # raises if a send failed
    assert offsets
    assert log_count(cluster, *voided) > voided_before  # Produce calls were refused
    got = consume_all(cluster, "reauth-b", "reauth-b-group", len(futures))
    assert len(got) == len(futures)
    for partition in range(3):
        sequence = in_partition_order(got, partition)
        assert sequence == sorted(sequence) and len(sequence) == len(set(sequence))
        assert sequence == list(range(partition, len(futures), 3))


def test_a_changed_password_fails_the_old_client_and_the_new_one_works(cluster):
    """(b) The old client's next call fails with SASL_AUTHENTICATION_FAILED naming
    alice and her mechanism, one login tried per call, not in a loop."""
    producer = Producer(cluster.node.bootstrap, linger_ms=0, **ALICE)
    admin = Admin(cluster.node.bootstrap, **ALICE)
    consumer = Consumer(
        "reauth-c",
        bootstrap_servers=cluster.node.bootstrap,
        group_id="reauth-c-group",
        auto_offset_reset="earliest",
        **ALICE,
    )
    try:
        producer.send("reauth-c", b"before").get(timeout=30)
        assert "reauth-c" in admin.list_topics()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while b"before" not in got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        assert b"before" in got
        set_password(cluster, "alice-new")
        error: KafkaError | None = None
        deadline = time.monotonic() + 15  # until the node has applied the change
        while error is None and time.monotonic() < deadline:
            try:
                producer.send("reauth-c", b"meanwhile").get(timeout=30)
                time.sleep(0.1)
            except KafkaError as e:
                error = e
        assert isinstance(error, SaslAuthenticationFailedError), error
        assert "User:alice" in str(error) and "SCRAM-SHA-256" in str(error), str(error)
        # Each later call tries one login, fails at once, and is not retried.
        failed_logins = ("grpc_authentication_failed", '"user":"alice"')
        failed_before = log_count(cluster, *failed_logins)
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationFailedError, match="User:alice"):
            producer.send("reauth-c", b"after").get(timeout=30)
        with pytest.raises(SaslAuthenticationFailedError, match="User:alice"):
            admin.list_topics()
        assert time.monotonic() - started < 10
        # One failed login each: the producer's Produce, the admin's Metadata.
        assert log_count(cluster, *failed_logins) - failed_before == 2
        # The consumer's poll() raises it too, and its group membership stops
        # rather than logging in again in the background.
        with pytest.raises(SaslAuthenticationFailedError, match="User:alice"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
        settled = log_count(cluster, *failed_logins)
        time.sleep(3)
        assert log_count(cluster, *failed_logins) - settled <= 1
        with Producer(cluster.node.bootstrap, linger_ms=0, **ALICE_NEW) as fresh:
            fresh.send("reauth-c", b"new-password").get(timeout=30)
    finally:
        producer.close()
        admin.close()
        consumer.close()
        set_password(cluster, "alice-secret")
    log = cluster.node.log_path.read_text()
    assert "alice-new" not in log and "alice-secret" not in log


def test_the_login_renews_at_a_random_85_to_95_percent_of_the_lifetime(cluster):
    """The proactive path, on the node's real lifetime answer: the injected random
    picks the point in KIP-368's window, the injected clock crosses it."""
    for rand, share in ((0.0, 0.85), (1.0, 0.95), (0.5, 0.90)):
        clock = [100.0]
        with grpc.insecure_channel(cluster.node.bootstrap) as channel:
            login = SaslLogin(
                channel,
                "PLAIN",
                "admin",
                "admin-secret",
                rand=lambda r=rand: r,
                clock=lambda c=clock: c[0],
            )
            login.token()
            clock[0] += LIFETIME_S * share - 0.01
            login.token()
            assert login.logins == 1, share
            clock[0] += 0.02
            login.token()
            assert login.logins == 2, share


def test_a_token_renewed_early_is_not_taken_for_one_the_node_voided(cluster):
    """A call refused with token 1 while another thread had already renewed early to
    token 2 (before alice's credential changed, voiding both): it logs in again
    rather than trust token 2, and threads refused later share that login."""
    clock = [0.0]
    request = client_pb2.MetadataRequest(all_topics=True)
    with grpc.insecure_channel(cluster.node.bootstrap) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        login = SaslLogin(channel, "SCRAM-SHA-256", "alice", "alice-secret", clock=lambda: clock[0])
        first = login.token()
        clock[0] += LIFETIME_S  # past the refresh point: the next call renews early
        second = login.token()
        assert login.logins == 2
        set_password(cluster, "alice-secret")
        deadline = time.monotonic() + 10
        while True:  # until the node has applied it
            try:
                stub.Metadata(request, metadata=[("seglog-sasl-token", second)], timeout=10)
            except grpc.RpcError as refused:
                assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
                break
            assert time.monotonic() < deadline, "the credential change was not applied"
            time.sleep(0.1)
        third = login.renew(first)
        assert login.logins == 3
        assert login.renew(second) == third and login.renew(first) == third
        assert login.logins == 3
        stub.Metadata(request, metadata=[("seglog-sasl-token", third)], timeout=10)
