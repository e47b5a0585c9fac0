"""What a chaos run sees of the cluster: leaders, ISRs and each replica's offsets,
read over seglog's own gRPC API from any node that answers."""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from seglog.client.admin import Admin, NewTopic
from seglog.client.errors import KafkaError
from seglog.harness.health import open_channel
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

from .targets import Target

# --- cluster state --------------------------------------------------------------------


@dataclass
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class ReplicaOffsets:
    partition: int
    leader: int
    high_watermark: int
    leos: dict[int, int]


class ClusterView:
    """Leaders, ISRs and (from the leaders) HW and replica LEOs, through the client."""

    def __init__(self, target: Target, topic: str) -> None:
        self.target = target
        self.topic = topic
        self.admin = Admin(target.bootstrap, request_timeout_ms=10_000, **target.security)

    def close(self) -> None:
        self.admin.close()

    def create_topic(self, partitions: int, configs: dict[str, str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.admin.create_topics(
                    [NewTopic(self.topic, partitions, 3, configs)], timeout_ms=10_000
                )
                break
            except KafkaError as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        self.wait_converged(partitions, timeout_s)

    def node_views(self, timeout_s: float = 2.0) -> dict[int, list[PartitionState]]:
        """Each reachable node's own metadata for the topic. Asked node by node: a
        node that is paused, cut off or whose metadata stopped moving would
        otherwise pass its stale view off as the cluster's."""
        views: dict[int, list[PartitionState]] = {}
        for node in self.target.node_ids:
            try:
                with open_channel(self.target.address(node), self.target.security) as channel:
                    r = client_pb2_grpc.SegLogStub(channel).Metadata(
                        pb.MetadataRequest(topics=[self.topic]), timeout=timeout_s
                    )
            except grpc.RpcError:
                continue
            for t in r.topics:
                if t.name == self.topic and not t.error_code:
                    views[node] = [
                        PartitionState(
                            p.partition,
                            p.leader_id,
                            p.leader_epoch,
                            tuple(p.replica_nodes),
                            tuple(sorted(p.isr_nodes)),
                        )
                        for p in sorted(t.partitions, key=lambda p: p.partition)
                    ]
        return views

    def partitions(self) -> list[PartitionState]:
        """The newest state of each partition any node knows (highest leader epoch)."""
        best: dict[int, PartitionState] = {}
        for states in self.node_views().values():
            for p in states:
                if p.partition not in best or p.leader_epoch > best[p.partition].leader_epoch:
                    best[p.partition] = p
        if not best:
            # Nobody answered directly: fall back to the client's retrying path.
            t = self.admin.describe_topics([self.topic])[0]
            return [
                PartitionState(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr)
                for p in t.partitions
            ]
        return [best[p] for p in sorted(best)]

    def leader_of(self, partition: int) -> int:
        for p in self.partitions():
            if p.partition == partition:
                return p.leader
        return -1

    def wait_new_leader(self, partition: int, old: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                leader = self.leader_of(partition)
                if leader >= 0 and leader != old:
                    return leader
            except KafkaError:
                pass
            time.sleep(0.3)
        return -1

    def converged(self, partitions: int) -> bool:
        """Every node answers, all agree on each partition's leader, epoch and ISR,
        and every ISR holds all replicas."""
        views = self.node_views()
        if set(views) != set(self.target.node_ids):
            return False
        states = list(views.values())
        first = states[0]
        return (
            len(first) == partitions
            and all(s == first for s in states[1:])
            and all(p.leader >= 0 and len(p.isr) == len(p.replicas) for p in first)
        )

    def wait_converged(self, partitions: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.converged(partitions):
                return True
            time.sleep(0.5)
        return False

    def replica_offsets(self) -> dict[int, ReplicaOffsets]:
        """HW and each replica's LEO, per partition, from each partition's leader."""
        out: dict[int, ReplicaOffsets] = {}
        leaders = {p.leader for p in self.partitions() if p.leader >= 0}
        for leader in sorted(leaders):
            with open_channel(self.target.address(leader), self.target.security) as channel:
                stub = client_pb2_grpc.SegLogStub(channel)
                try:
                    r = stub.DescribeReplicas(
                        pb.DescribeReplicasRequest(topics=[self.topic]), timeout=10
                    )
                except grpc.RpcError:
                    continue
            for p in r.partitions:
                if p.topic == self.topic:
                    out[p.partition] = ReplicaOffsets(
                        p.partition,
                        leader,
                        p.high_watermark,
                        {s.node_id: s.log_end_offset for s in p.replicas},
                    )
        return out

    def wait_replicas_caught_up(
        self, partitions: int, timeout_s: float
    ) -> dict[int, ReplicaOffsets]:
        """Once producing stopped: until every replica's LEO equals the HW."""
        deadline = time.monotonic() + timeout_s
        last: dict[int, ReplicaOffsets] = {}
        while time.monotonic() < deadline:
            try:
                last = self.replica_offsets()
            except KafkaError:
                time.sleep(0.5)
                continue
            if len(last) == partitions and all(
                len(r.leos) == 3 and all(leo == r.high_watermark for leo in r.leos.values())
                for r in last.values()
            ):
                return last
            time.sleep(0.5)
        return last
