from collections.abc import Iterator

import pytest

from seglog.harness.kafka_cluster import GROUP_OVERRIDES, KafkaCluster


class TxnCluster(KafkaCluster):
    # Health within 90 s rather than 30: the three nodes start side by side and on a
    # loaded machine their imports alone can take longer than 30 s.
    start_timeout_s = 90.0


@pytest.fixture(scope="session")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes for seglog's own transactional clients, which speak gRPC; the
    Kafka listener is there for the coordinators' WriteTxnMarkers between nodes.
    Shared by the tests (each uses topics and transactional ids of its own)."""
    cluster = TxnCluster(tmp_path_factory.mktemp("txn-cluster"), GROUP_OVERRIDES)
    try:
        cluster.start_all()
        yield cluster
        assert not cluster.crashes(), cluster.crashes()
    finally:
        cluster.stop_all()
