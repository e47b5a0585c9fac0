"""Kafka's group coordinator without I/O: one `CoordinatorShard`
(group_coordinator_shard.py) per `__consumer_offsets` partition this node leads,
each loaded from its partition and fenced by the leader epoch it was loaded at, and
the routing of a group's requests to its shard. The node's shell (offsets_topic.py)
and the simulator (sim/group_sim.py) drive these same objects.

The coordinator's parts, along Kafka's seams: the shard (a partition's groups and
offsets, fed by requests and timers, answering with actions: coordinator_actions.py);
the groups of either type (group_metadata_manager.py); the classic protocol's
join-sync-heartbeat state machine (classic_group_protocol.py, over group_state.py);
KIP-848's consumer groups (consumer_group.py); the offsets
(offset_metadata_manager.py); the requests and results (group_messages.py), error
names (group_errors.py) and settings (group_config.py); the records of
`__consumer_offsets` (offsets_records.py, coordinator_records.py)."""

from __future__ import annotations

import random

from . import offsets_records as rec
from .coordinator_actions import Action
from .group_config import GroupConfig
from .group_coordinator_shard import CoordinatorShard
from .group_errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    INVALID_GROUP_ID,
    NONE,
    NOT_COORDINATOR,
)
from .group_messages import ListedGroup


class GroupCoordinator:
    """Every shard this node leads; requests go to the shard of their group."""

    def __init__(self, config: GroupConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.shards: dict[int, CoordinatorShard] = {}

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # --- leadership -----------------------------------------------------------------

    def begin_loading(
        self, partition: int, leader_epoch: int
    ) -> tuple[CoordinatorShard, list[Action]]:
        """This node leads `partition` at `leader_epoch`: a new shard, loading (its
        groups answer COORDINATOR_LOAD_IN_PROGRESS until finish_loading)."""
        out = self.unload(partition)
        shard = CoordinatorShard(partition, leader_epoch, self.config, self.rng)
        self.shards[partition] = shard
        return shard, out

    def unload(self, partition: int) -> list[Action]:
        shard = self.shards.pop(partition, None)
        return shard.unload() if shard is not None else []

    def on_write_done(
        self, partition: int, leader_epoch: int, write_id: int, error: str, now_ms: int
    ) -> list[Action]:
        shard = self.shards.get(partition)
        if shard is None or shard.leader_epoch != leader_epoch:
            return []  # fenced: the shard that wrote it is gone
        return shard.on_write_done(write_id, error, now_ms)

    def tick(self, now_ms: int) -> list[Action]:
        out: list[Action] = []
        for shard in list(self.shards.values()):
            if shard.loading is None:
                out += shard.tick(now_ms)
        return out

    # --- routing --------------------------------------------------------------------

    def shard_for(self, group_id: str) -> tuple[CoordinatorShard | None, str]:
        """The group's shard, or the error to answer with."""
        if not group_id:
            return None, INVALID_GROUP_ID
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            return None, NOT_COORDINATOR
        if shard.loading is not None:
            return None, COORDINATOR_LOAD_IN_PROGRESS
        return shard, NONE

    def list_groups(self, states: set[str]) -> tuple[str, list[ListedGroup]]:
        out: list[ListedGroup] = []
        error = NONE
        for shard in self.shards.values():
            if shard.loading is not None:
                error = COORDINATOR_LOAD_IN_PROGRESS
                continue
            out += shard.list_groups(states)
        return error, sorted(out, key=lambda g: g.group_id)
