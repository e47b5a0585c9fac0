"""A Consumer closed while its group join is still in flight (the README's snippet:
subscribe, one short poll, close) leaves the group with a LeaveGroup: the next member
of the group gets every partition at once, not after the ghost's session timeout
(45 s by default) had run out. One real node, Kafka's group defaults."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.harness.node_process import NodeProcess

SESSION_MS = 45_000  # Kafka's default: what a ghost member would hold the group for
# A bound, far below the session timeout; the new member usually has its partitions
# within the initial rebalance delay (3 s) plus a join.
ASSIGNED_WITHIN_S = 20.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    n = NodeProcess(
        tmp_path_factory.mktemp("close-during-join"),
        overrides={"offsets.topic.num.partitions": "1", "num.partitions": "3"},
    ).start()
    try:
        with Admin(n.bootstrap) as admin:
            admin.create_topics([NewTopic("readme-demo", 3, 1)])
        yield n
    finally:
        n.stop()


def test_close_during_the_join_leaves_the_group(node: NodeProcess) -> None:
    first = Consumer(
        bootstrap_servers=node.bootstrap,
        group_id="billing",
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
    )
    first.subscribe(["readme-demo"])
    first.poll(timeout_ms=300)  # the join has started; it is held for the initial delay
    first.close()

    second = Consumer(
        bootstrap_servers=node.bootstrap,
        group_id="billing",
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
    )
    try:
        second.subscribe(["readme-demo"])
        started = time.monotonic()
        while time.monotonic() - started < ASSIGNED_WITHIN_S and len(second.assignment()) < 3:
            second.poll(timeout_ms=200)
        waited = time.monotonic() - started
        assert second.assignment() == {TopicPartition("readme-demo", p) for p in range(3)}, (
            f"after {waited:.1f}s the new member has {sorted(second.assignment())}: the closed "
            "consumer is still a member of the group"
        )
        with Admin(node.bootstrap) as admin:
            (group,) = admin.describe_consumer_groups(["billing"])
        assert len(group.members) == 1, group
    finally:
        second.close()
