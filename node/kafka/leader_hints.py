"""KIP-951's leader discovery, as Kafka's KafkaApis fills it: a partition answered
NOT_LEADER_OR_FOLLOWER (Produce v10+; Fetch v16+, and FENCED_LEADER_EPOCH there too)
carries its current leader (id, epoch), and the answer's NodeEndpoints the address on
the request's listener of each leader named, so the client goes there without asking
for metadata first. Produce (handlers.py) and Fetch (handlers.py, replica_fetch.py)
answer through the one `LeaderHints`."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from seglog.controller.metadata_image import MetadataImage

from . import hot_codec
from .metadata import live_brokers

TopicPartition = tuple[str, int]
NO_LEADER = (-1, -1)  # LeaderIdAndEpoch's default, which Kafka does not write
PRODUCE_HINTED = frozenset({"NOT_LEADER_OR_FOLLOWER"})  # KafkaApis.handleProduceRequest
FETCH_HINTED = frozenset({"NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"})  # handleFetchRequest


class LeaderHints:
    """One answer's hints: `current_leader` per partition, `endpoints` at the end."""

    def __init__(self, node: Any, listener: str, hinted: Collection[str]) -> None:
        self.node = node  # the KafkaNode: node_id, replica_manager, metadata_image()
        self.listener = listener
        self.hinted = hinted
        self._image: MetadataImage | None = None
        self._endpoints: dict[int, hot_codec.NodeEndpoint] = {}

    def current_leader(
        self, tp: TopicPartition, error: str, known: tuple[int, int] = NO_LEADER
    ) -> tuple[int, int] | None:
        """The partition's current leader for its answer, None when the error carries
        none (or the leader is not known at all: Kafka's default, left unwritten).
        `known`: the leader the partition's own read saw (a Fetch's)."""
        if error not in self.hinted:
            return None
        leader = known if known != NO_LEADER else self._leader(tp)
        if leader == NO_LEADER:
            return None
        if leader[0] == self.node.node_id and self.node.replica_manager.in_doubt() is not None:
            # Refused in doubt (its controller process silent): the leader has moved, and
            # naming itself would send librdkafka back here with no metadata refresh.
            return None
        image = self._metadata()
        live = live_brokers(image, self.listener).get(leader[0])
        if live is not None:
            broker, host, port = live
            self._endpoints[leader[0]] = (leader[0], host, port, broker.rack)
        return leader

    def endpoints(self) -> list[hot_codec.NodeEndpoint]:
        """The endpoints of the leaders named (alive, on this listener), by node id."""
        return [self._endpoints[i] for i in sorted(self._endpoints)]

    def _leader(self, tp: TopicPartition) -> tuple[int, int]:
        """Kafka's getCurrentLeader: this node's replica's view when it hosts the
        partition, else the metadata's."""
        hp = self.node.replica_manager.hosted(tp)
        if hp is not None:
            with hp.plog.lock:
                return hp.replica.leader_id, hp.replica.leader_epoch
        topic = self._metadata().topics.get(tp[0])
        state = topic.partitions.get(tp[1]) if topic is not None else None
        return NO_LEADER if state is None else (state.leader, state.leader_epoch)

    def _metadata(self) -> MetadataImage:
        if self._image is None:
            self._image = self.node.metadata_image()
        return self._image
