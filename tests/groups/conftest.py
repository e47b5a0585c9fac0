from collections.abc import Iterator

import pytest

from seglog.harness.kafka_cluster import GROUP_OVERRIDES, KafkaCluster


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes with Kafka listeners for the group tests of one module."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("groups"), GROUP_OVERRIDES)
    yield from cluster.serve_tests()
