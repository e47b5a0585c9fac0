"""Raft messages through cluster.proto: every kind comes back as it went out, and an
empty message is refused."""

from __future__ import annotations

import pytest

from seglog.controller import raft
from seglog.node.controller.raft_transport import from_proto, to_proto
from seglog.proto import cluster_pb2 as cpb

MESSAGES: list[raft.Message] = [
    raft.VoteRequest(1, 2, 5, 10, 4, True),
    raft.VoteResponse(2, 1, 5, False, True),
    raft.AppendRequest(1, 3, 7, 9, 6, (raft.Entry(10, 7, b"x"), raft.Entry(11, 7, b"")), 8),
    raft.AppendRequest(1, 3, 7, 9, 6, (), 8),
    raft.AppendResponse(3, 1, 7, True, 11, 0, 2, 3),
    raft.InstallSnapshotRequest(1, 2, 9, 100, 8, b"snap"),
    raft.InstallSnapshotResponse(2, 1, 9, 100),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_comes_back_as_it_went_out(message: raft.Message) -> None:
    wire = to_proto(message).SerializeToString()
    assert from_proto(cpb.RaftMessage.FromString(wire)) == message


def test_the_body_names_the_kind() -> None:
    p = to_proto(raft.AppendResponse(3, 1, 7, False, reject_index=4, hint_index=2, hint_term=1))
    assert p.WhichOneof("body") == "append_response"
    body = p.append_response
    assert (p.src, p.dst, body.success, body.reject_index, body.hint_term) == (3, 1, False, 4, 1)


def test_an_empty_message_is_refused() -> None:
    with pytest.raises(ValueError, match="empty Raft message from node 4"):
        from_proto(cpb.RaftMessage(src=4, dst=1))
