from collections.abc import Iterator

import pytest

from seglog.harness.kafka_cluster import GROUP_OVERRIDES, KafkaCluster

# Each node serves its metrics on a free port (harness/metrics_scrape.py finds it).
METRICS = {"metrics.port": "0", "metrics.host": "127.0.0.1"}


class TxnCluster(KafkaCluster):
    # Health within 90 s rather than 30: the three nodes start side by side and on a
    # loaded machine their imports alone can take longer than 30 s.
    start_timeout_s = 90.0


@pytest.fixture(scope="session")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes for seglog's own transactional clients, which speak gRPC; the
    Kafka listener is there for the coordinators' WriteTxnMarkers between nodes.
    Shared by the tests (each uses topics and transactional ids of its own)."""
    cluster = TxnCluster(tmp_path_factory.mktemp("txn-cluster"), {**GROUP_OVERRIDES, **METRICS})
    yield from cluster.serve_tests()


# KIP-890's verification off: a leader takes a transactional batch without asking the
# coordinator, as Kafka before 3.6 (and seglog before it) did.
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="session")
def unverified_txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes with transaction.partition.verification.enable=false: where a
    producer can still open a transaction its coordinator does not know (a hanging
    one), for `find-hanging`/`abort` and to show what verification refuses."""
    cluster = TxnCluster(
        tmp_path_factory.mktemp("txn-unverified"), {**GROUP_OVERRIDES, **UNVERIFIED}
    )
    yield from cluster.serve_tests()
