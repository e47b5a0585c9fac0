"""KIP-227 fetch sessions: the leader-side cache (ids, epochs, eviction) and a
follower's incremental fetch against a real ReplicaManager over real logs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from replica_manager_fixtures import leading

from seglog.node.fetch_session import FetchSessionCache, FetchSessionError
from seglog.node.partition_requests import FetchSpec
from seglog.node.replica_manager import ReplicaManager
from seglog.storage.record_batch import NewRecord, build_batch


def test_epochs_must_follow_each_other() -> None:
    cache = FetchSessionCache(slots=4)
    s = cache.open(replica_id=2)
    assert cache.get(s.session_id, 1, 2) is s
    assert cache.get(s.session_id, 2, 2) is s
    with pytest.raises(FetchSessionError) as e:
        cache.get(s.session_id, 2, 2)  # a replayed epoch
    assert e.value.error_name == "INVALID_FETCH_SESSION_EPOCH"
    with pytest.raises(FetchSessionError) as e:
        cache.get(s.session_id, 3, replica_id=3)  # another follower's id
    assert e.value.error_name == "FETCH_SESSION_ID_NOT_FOUND"


def test_the_least_recently_used_session_is_evicted() -> None:
    cache = FetchSessionCache(slots=2)
    a, b = cache.open(1), cache.open(2)
    cache.get(a.session_id, 1, 1)  # a is now the most recently used
    cache.open(3)
    assert len(cache) == 2
    assert cache.get(a.session_id, 2, 1) is a
    with pytest.raises(FetchSessionError) as e:
        cache.get(b.session_id, 1, 2)
    assert e.value.error_name == "FETCH_SESSION_ID_NOT_FOUND"


PARTITIONS = 50


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Node 1 leading PARTITIONS partitions with follower 2 in the ISR."""
    with leading(tmp_path, [(1, 2)] * PARTITIONS) as rm:
        yield rm


def specs(offsets: dict[int, int]) -> list[FetchSpec]:
    return [FetchSpec("t", p, o, 0, 1 << 20, -1 if o == 0 else 0) for p, o in offsets.items()]


def fetch(rm: ReplicaManager, sid: int, epoch: int, changed: list[FetchSpec], wait_ms: int = 0):
    return rm.fetch_in_session(
        sid, epoch, changed, [], replica_id=2, max_wait_ms=wait_ms, min_bytes=1, max_bytes=10 << 20
    )


def test_an_incremental_fetch_carries_and_answers_only_what_changed(leader: ReplicaManager) -> None:
    rm = leader
    sid, first = fetch(rm, 0, 0, specs(dict.fromkeys(range(PARTITIONS), 0)))
    assert sid > 0 and len(first) == PARTITIONS  # a full fetch answers every partition
    # Nothing changed: an incremental fetch with no partitions answers none.
    _sid, idle = fetch(rm, sid, 1, [])
    assert idle == []
    # New data on two partitions: only those are answered, with their records.
    for p in (3, 17):
        produced = rm.produce(("t", p), build_batch([NewRecord(b"v%d" % p)]), acks=1)
        assert produced.error_name == "NONE"
    _sid, answered = fetch(rm, sid, 2, [])
    assert sorted(r.partition for r in answered) == [3, 17]
    assert all(r.records for r in answered)
    # The follower moves its position on those two; the HW follows (read again in the
    # same long poll, after the follower's new position moved it), nothing else moves.
    _sid, after = fetch(rm, sid, 3, specs({3: 1, 17: 1}), wait_ms=300)
    assert sorted((r.partition, r.high_watermark) for r in after) == [(3, 1), (17, 1)]
    assert all(not r.records for r in after)
    _sid, quiet = fetch(rm, sid, 4, [])
    assert quiet == []


def test_a_new_broker_epoch_reaches_the_idle_partitions_of_a_session(tmp_path: Path) -> None:
    """A restarted follower fetched with its old broker epoch (its registration came
    after its first fetch), then with the new one: its idle partitions, never named
    again by its incremental fetches, still learn the new epoch and it rejoins their
    ISRs. (It used to stay out, ineligible, until a partition's position moved: the
    heal in test_acks_all_with_two_of_three_nodes_down_is_not_enough_replicas then
    waited some 30 s.)"""
    registered = {2: 13}  # the metadata's epoch of broker 2, the new registration

    def eligible(replica: int, broker_epoch: int) -> bool:
        return broker_epoch < 0 or broker_epoch == registered.get(replica)

    with leading(tmp_path, [(1, 2)] * 3, isr=(1,), is_replica_eligible=eligible) as rm:
        old, new = 12, 13
        sid, first = rm.fetch_in_session(
            0,
            0,
            specs(dict.fromkeys(range(3), 0)),
            [],
            replica_id=2,
            replica_epoch=old,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
        )
        assert len(first) == 3
        hosted = [rm.hosted(("t", p)) for p in range(3)]
        assert all(hp is not None for hp in hosted)
        # Caught up, but with an epoch the metadata does not hold: not in the ISRs.
        assert all(hp.replica.pending_isr_change is None for hp in hosted if hp)
        rm.fetch_in_session(
            sid,
            1,
            [],
            [],
            replica_id=2,
            replica_epoch=new,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
        )
        for hp in hosted:
            assert hp is not None
            change = hp.replica.pending_isr_change
            assert change is not None and change.new_isr == (1, 2), hp.tp


def test_a_deleted_topics_partitions_are_answered_and_forgotten_by_their_old_id() -> None:
    """Fetch v13+ names topics by id (KIP-516). Once a topic is deleted the metadata no
    longer knows its id, so the follower's forget names it by the id's text: the session
    maps it back to the partitions it holds (librdkafka's 0107_topic_recreate left them
    in the session, whose answers then failed to encode, and replication stalled)."""
    old, new = uuid.uuid4(), uuid.uuid4()
    cache = FetchSessionCache(slots=2)
    s = cache.open(replica_id=2)
    s.update([FetchSpec("t", p, 0, 0, 1 << 20, -1) for p in range(3)], [], {"t": old})
    s.update([FetchSpec("u", 0, 0, 0, 1 << 20, -1)], [], {"u": uuid.uuid4()})
    assert s.topic_ids["t"] == old  # what the answers name a deleted "t" by
    s.update([], [(str(old), 0), (str(old), 1)])  # forgotten by id after the delete
    assert sorted(s.specs) == [("t", 2), ("u", 0)]
    # Recreated under the same name: the new id replaces the old one, whose late
    # forgets then leave the new partitions alone.
    s.update([FetchSpec("t", 0, 0, 0, 1 << 20, -1)], [], {"t": new})
    s.update([], [(str(old), 2)])
    assert sorted(s.specs) == [("t", 0), ("t", 2), ("u", 0)]
    assert s.topic_ids["t"] == new
    s.update([], [(str(new), 0), (str(new), 2)])
    assert sorted(s.specs) == [("u", 0)] and "t" not in s.topic_ids
