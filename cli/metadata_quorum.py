"""`seglog metadata-quorum describe --status|--replication`, as kafka-metadata-quorum:
the Raft quorum of the controllers, as its leader sees it.

--status:

    ClusterId:              seglog-cluster
    LeaderId:               2
    LeaderEpoch:            7
    HighWatermark:          1234
    MaxFollowerLag:         0
    MaxFollowerLagTimeMs:   12
    CurrentVoters:          [1,2,3]
    CurrentObservers:       []

--replication (one row per voter, the leader first):

    NodeId  LogEndOffset  Lag  LastFetchTimestamp  LastCaughtUpTimestamp  Status

The leader is found by asking the bootstrap nodes' DescribeQuorum, then asked itself
(only it knows each voter's log end and when it last heard from it). Kafka's epoch is
the Raft term; the high watermark is the commit index.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from .arguments import add_actions, bootstrap_servers, open_admin, security_options

if TYPE_CHECKING:
    from seglog.client.security import ClientSecurity
    from seglog.proto import cluster_pb2 as cpb

TIMEOUT_S = 5.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    commands = p.add_subparsers(dest="quorum_command", required=True, metavar="describe")
    d = commands.add_parser("describe", help="describe the quorum")
    add_actions(d, {"--status": "leader, epoch, lag summary", "--replication": "one row per voter"})


def _ask(address: str, security: ClientSecurity | None) -> cpb.DescribeQuorumResponse:
    import grpc

    from seglog.client.quorum import NoControllerService, describe_quorum

    try:
        return describe_quorum(address, TIMEOUT_S, security)
    except NoControllerService:
        raise OSError(
            f"{address} runs without a controller quorum (single-node mode): "
            "there is no metadata quorum to describe"
        ) from None
    except grpc.RpcError as e:
        status = e.code()  # type: ignore[attr-defined]
        raise OSError(f"DescribeQuorum failed at {address}: {status.name}") from None


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.client.cluster import parse_bootstrap
    from seglog.client.security import ClientSecurity

    out = out or sys.stdout
    security = ClientSecurity.from_options(security_options(args))
    with open_admin(args) as admin:
        cluster = admin.describe_cluster()
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers}
    failures = []
    leader_id = -1
    for host, port in parse_bootstrap(bootstrap_servers(args)):
        try:
            leader_id = _ask(f"{host}:{port}", security).leader_id
            break
        except OSError as e:
            failures.append(str(e))
    if leader_id < 0:
        raise OSError("no quorum leader known: " + ("; ".join(failures) or "no leader elected"))
    if leader_id not in addresses:
        raise OSError(f"the quorum leader {leader_id} is not among the registered brokers")
    r = _ask(addresses[leader_id], security)
    if r.leader_id != r.node_id:
        raise OSError(f"node {leader_id} is no longer the quorum leader; try again")
    voters = sorted(r.voters, key=lambda v: (v.node_id != r.node_id, v.node_id))
    now_ms = int(time.time() * 1000)
    if args.status:
        followers = [v for v in voters if v.node_id != r.node_id]
        end = _end(r)
        lag = max((end - v.log_end_index for v in followers), default=0)
        lag_ms = max(
            (
                now_ms - v.last_caught_up_timestamp_ms
                for v in followers
                if v.last_caught_up_timestamp_ms >= 0
            ),
            default=0,
        )
        rows = [
            ("ClusterId:", cluster.cluster_id),
            ("LeaderId:", str(r.leader_id)),
            ("LeaderEpoch:", str(r.term)),
            ("HighWatermark:", str(r.commit_index)),
            ("MaxFollowerLag:", str(lag)),
            ("MaxFollowerLagTimeMs:", str(lag_ms)),
            ("CurrentVoters:", "[" + ",".join(str(v.node_id) for v in r.voters) + "]"),
            ("CurrentObservers:", "[]"),
        ]
        for key, value in rows:
            print(f"{key:<24}{value}", file=out)
        return 0
    header = (
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    )
    table = [header]
    for v in voters:
        table.append(
            (
                str(v.node_id),
                str(v.log_end_index),
                str(_end(r) - v.log_end_index),
                str(v.last_fetch_timestamp_ms),
                str(v.last_caught_up_timestamp_ms),
                "Leader" if v.node_id == r.node_id else "Follower",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=out
        )
    return 0


def _end(r: cpb.DescribeQuorumResponse) -> int:
    """The leader's own log end (its row among the voters)."""
    return next(v.log_end_index for v in r.voters if v.node_id == r.node_id)
