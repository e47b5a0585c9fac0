import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Shared helpers (node_process.py) live beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from node_process import NodeProcess


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    """One real node process on a free loopback port, stopped cleanly afterwards."""
    n = NodeProcess(tmp_path / "cluster").start()
    try:
        yield n
    finally:
        n.stop()
