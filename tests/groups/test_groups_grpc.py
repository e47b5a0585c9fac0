"""The gRPC GroupCoordinator service on real nodes: the same coordinator as the Kafka
listener's, reached by seglog's own clients. A member joins (MEMBER_ID_REQUIRED
first, as JoinGroup v4+), syncs its assignment, commits; a Kafka client sees the same
group and offsets."""

from __future__ import annotations

import grpc
from confluent_kafka import Consumer, TopicPartition

from seglog.proto import groups_pb2 as gpb
from seglog.proto import groups_pb2_grpc

GROUP = "grpc-group"


def stub(cluster, node_id: int) -> groups_pb2_grpc.GroupCoordinatorStub:
    return groups_pb2_grpc.GroupCoordinatorStub(cluster.channel(node_id))


def test_a_member_over_grpc_joins_syncs_commits_and_kafka_sees_it(group_cluster):
    def find() -> gpb.FindCoordinatorResponse | None:
        r = stub(group_cluster, 1).FindCoordinator(gpb.FindCoordinatorRequest(key=GROUP))
        return r if r.error_code == 0 else None

    found = group_cluster.wait("a coordinator", find)
    assert f"{found.host}:{found.port}" == group_cluster.nodes[found.node_id].bootstrap
    channel = grpc.insecure_channel(f"{found.host}:{found.port}")
    coord = groups_pb2_grpc.GroupCoordinatorStub(channel)
    join = gpb.JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[gpb.JoinGroupProtocol(name="range", metadata=b"\x00\x00")],
        client_id="grpc-test",
    )

    def first_join() -> gpb.JoinGroupResponse | None:
        # Right after __consumer_offsets is created, the coordinator may not have the
        # metadata yet: retriable errors, as a client retries them.
        r = coord.JoinGroup(join)
        assert r.error_code in (79, 14, 15, 16), r
        return r if r.error_code == 79 else None

    first = group_cluster.wait("MEMBER_ID_REQUIRED", first_join)
    assert first.member_id  # the id to join with
    join.member_id = first.member_id
    joined = coord.JoinGroup(join)
    assert joined.error_code == 0 and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id]
    synced = coord.SyncGroup(
        gpb.SyncGroupRequest(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=[gpb.SyncGroupAssignment(member_id=joined.member_id, assignment=b"A")],
        )
    )
    assert synced.error_code == 0 and synced.assignment == b"A"
    hb = coord.Heartbeat(
        gpb.HeartbeatRequest(
            group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id
        )
    )
    assert hb.error_code == 0
    committed = coord.OffsetCommit(
        gpb.OffsetCommitRequest(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            topics=[
                gpb.OffsetCommitTopic(
                    name="grpc-topic",
                    partitions=[
                        gpb.OffsetCommitPartition(
                            partition_index=2, committed_offset=17, committed_leader_epoch=-1
                        )
                    ],
                )
            ],
        )
    )
    assert committed.topics[0].partitions[0].error_code == 0
    fetched = coord.OffsetFetch(gpb.OffsetFetchRequest(group_id=GROUP, all_topics=True))
    assert [
        (t.name, p.partition_index, p.committed_offset)
        for t in fetched.topics
        for p in t.partitions
    ] == [("grpc-topic", 2, 17)]
    described = coord.DescribeGroups(gpb.DescribeGroupsRequest(groups=[GROUP])).groups[0]
    assert described.group_state == "Stable" and described.protocol_data == "range"
    assert described.members[0].client_id == "grpc-test"
    listed = coord.ListGroups(gpb.ListGroupsRequest(states_filter=["Stable"]))
    assert GROUP in [g.group_id for g in listed.groups]
    # Another node is not the coordinator.
    other = next(i for i in group_cluster.nodes if i != found.node_id)
    refused = stub(group_cluster, other).Heartbeat(
        gpb.HeartbeatRequest(
            group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id
        )
    )
    assert refused.error_code == 16  # NOT_COORDINATOR

    # A Kafka client reads the same committed offset.
    c = Consumer({"bootstrap.servers": group_cluster.kafka_bootstrap, "group.id": GROUP})
    try:
        got = c.committed([TopicPartition("grpc-topic", 2)], timeout=30)
        assert got[0].offset == 17
    finally:
        c.close()

    # The member leaves; the empty group can then be deleted.
    left = coord.LeaveGroup(
        gpb.LeaveGroupRequest(
            group_id=GROUP, members=[gpb.MemberIdentity(member_id=joined.member_id)]
        )
    )
    assert left.error_code == 0 and left.members[0].error_code == 0
    deleted = coord.DeleteGroups(gpb.DeleteGroupsRequest(groups_names=[GROUP]))
    assert deleted.results[0].error_code == 0
    fetched = coord.OffsetFetch(gpb.OffsetFetchRequest(group_id=GROUP, all_topics=True))
    assert list(fetched.topics) == []
    channel.close()


def test_grpc_produce_to_the_offsets_topic_is_refused(group_cluster):
    from seglog.proto import client_pb2 as pb
    from seglog.storage.record_batch import NewRecord, build_batch

    group_cluster.wait(
        "the offsets topic",
        lambda: (
            stub(group_cluster, 1).FindCoordinator(gpb.FindCoordinatorRequest(key="x")).error_code
            == 0
            or None
        ),
    )
    answer = group_cluster.stub(1).Produce(
        pb.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            topics=[
                pb.TopicProduceData(
                    name="__consumer_offsets",
                    partitions=[
                        pb.PartitionProduceData(
                            partition=0, records=build_batch([NewRecord(b"v", b"k")])
                        )
                    ],
                )
            ],
        )
    )
    assert answer.topics[0].partitions[0].error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_a_burst_of_commits_does_not_starve_replication(group_cluster):
    """80 standalone commits at once to one coordinator: each waits for its replication
    on a gRPC worker, and with every worker waiting none was left for the follower
    fetches they waited on (all timed out). At most MAX_WAITING_CALLS wait now; the
    rest are refused with RESOURCE_EXHAUSTED and retried, and every commit lands."""
    import threading
    import time

    group = "burst-group"

    def find() -> gpb.FindCoordinatorResponse | None:
        r = stub(group_cluster, 1).FindCoordinator(gpb.FindCoordinatorRequest(key=group))
        return r if r.error_code == 0 else None

    found = group_cluster.wait("a coordinator", find)
    channel = grpc.insecure_channel(f"{found.host}:{found.port}")
    coord = groups_pb2_grpc.GroupCoordinatorStub(channel)
    outcomes: dict[int, object] = {}
    refused = [0]

    def commit(i: int) -> None:
        request = gpb.OffsetCommitRequest(
            group_id=group,
            generation_id=-1,
            topics=[
                gpb.OffsetCommitTopic(
                    name="burst",
                    partitions=[gpb.OffsetCommitPartition(partition_index=i, committed_offset=i)],
                )
            ],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                r = coord.OffsetCommit(request, timeout=40)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    outcomes[i] = e.code()
                    return
                refused[0] += 1
                time.sleep(0.05)
                continue
            code = r.topics[0].partitions[0].error_code
            if code in (14, 15, 16):  # the offsets topic is still being created
                time.sleep(0.1)
                continue
            outcomes[i] = code
            return
        outcomes[i] = "gave up"

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(80)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    elapsed = time.monotonic() - t0
    assert outcomes == {i: 0 for i in range(80)}, (outcomes, refused[0])
    assert elapsed < 60, elapsed
    fetched = coord.OffsetFetch(gpb.OffsetFetchRequest(group_id=group, all_topics=True))
    got = {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}
    assert got == {i: i for i in range(80)}
    channel.close()
