from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.harness.node_process import NodeProcess


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One real node for a module's tests that neither stop it nor touch its files
    (each uses its own topics): a node per test would dominate the run time."""
    n = NodeProcess(tmp_path_factory.mktemp("shared") / "cluster").start()
    try:
        yield n
    finally:
        n.stop()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    """One real node process on a free loopback port, stopped cleanly afterwards."""
    n = NodeProcess(tmp_path / "cluster").start()
    try:
        yield n
    finally:
        n.stop()
