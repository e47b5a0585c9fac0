from collections.abc import Iterator

import pytest

from seglog.harness.kafka_cluster import KafkaCluster


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes with Kafka listeners, shared by the tests that do not kill
    nodes (each uses topics of its own)."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"))
    yield from cluster.serve_tests()
