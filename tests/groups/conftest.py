import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from kafka_cluster import KafkaCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from group_overrides import GROUP_OVERRIDES


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes with Kafka listeners for the group tests of one module."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("groups"), GROUP_OVERRIDES)
    try:
        cluster.start_all()
        yield cluster
        assert not cluster.crashes(), cluster.crashes()
    finally:
        cluster.stop_all()
