"""`seglog cluster --describe`: the nodes a cluster knows (fenced or not), the active
controller with its Raft term, and each voter's Raft role (like kafka-cluster plus
kafka-metadata-quorum --describe --status, in one view).

Output, one line each:

    ClusterId: seglog-cluster
    Controller: 2	Term: 7
    Node: 1	Address: 127.0.0.1:9192	Fenced: false	Role: follower
    Node: 2	Address: 127.0.0.1:9193	Fenced: false	Role: leader
    Node: 3	Address: 127.0.0.1:9094	Fenced: true	Role: unreachable

The controller and term come from DescribeQuorum on the bootstrap node (the Controller
service on the same address). A node without the Controller service runs in single-node
mode: it is its own controller and there is no term (`Term: n/a`, `Role: n/a`). Every
node is a voter (broker-only nodes are not supported), so each node's role is asked of
the Controller service at its advertised address; `unreachable` when it does not answer.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from .arguments import add_actions, bootstrap_servers, open_admin, security_options

if TYPE_CHECKING:
    import grpc

    from seglog.client.security import ClientSecurity

ROLE_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class QuorumView:
    """One node's DescribeQuorum answer."""

    node_id: int
    leader_id: int
    term: int
    role: str
    commit_index: int


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_actions(p, {"--describe": "print nodes, controller and quorum roles"})


def _describe_quorum(
    address: str, timeout_s: float, security: ClientSecurity | None = None
) -> QuorumView:
    from seglog.client.quorum import describe_quorum  # grpc: not for `seglog --help`

    r = describe_quorum(address, timeout_s, security)
    return QuorumView(r.node_id, r.leader_id, r.term, r.role, r.commit_index)


def _rpc_detail(e: grpc.RpcError) -> str:
    status = e.code()  # type: ignore[attr-defined]
    return status.name if status is not None else "RPC failed"


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import grpc

    from seglog.client.cluster import parse_bootstrap
    from seglog.client.quorum import NoControllerService

    out = out or sys.stdout
    from seglog.client.security import ClientSecurity

    bootstrap = bootstrap_servers(args)
    security = ClientSecurity.from_options(security_options(args))
    with open_admin(args) as admin:
        cluster = admin.describe_cluster()
    timeout_s = min(ROLE_TIMEOUT_S, args.request_timeout_ms / 1000)

    # The controller and its term, as the first bootstrap node that answers sees them.
    single_node = False
    view: QuorumView | None = None
    failures: list[str] = []
    for host, port in parse_bootstrap(bootstrap):
        address = f"{host}:{port}"
        try:
            view = _describe_quorum(address, timeout_s, security)
            break
        except NoControllerService:
            single_node = True
            break
        except grpc.RpcError as e:
            failures.append(f"{address}: {_rpc_detail(e)}")
    if not single_node and view is None:
        raise OSError("DescribeQuorum failed on every bootstrap node (" + "; ".join(failures) + ")")

    roles: dict[int, QuorumView | None] = {}
    if not single_node:
        for b in cluster.brokers:
            try:
                roles[b.node_id] = _describe_quorum(f"{b.host}:{b.port}", timeout_s, security)
            except (grpc.RpcError, NoControllerService):
                roles[b.node_id] = None

    print(f"ClusterId: {cluster.cluster_id}", file=out)
    if single_node:
        print(f"Controller: {cluster.controller_id}\tTerm: n/a", file=out)
    else:
        assert view is not None
        leader, term = view.leader_id, view.term
        # The leader's own word on its term, when it answers (a follower may lag).
        own = roles.get(leader)
        if own is not None and own.leader_id == leader:
            term = own.term
        print(f"Controller: {leader if leader >= 0 else 'none'}\tTerm: {term}", file=out)
    for b in sorted(cluster.brokers, key=lambda b: b.node_id):
        if single_node:
            role = "n/a"
        else:
            answer = roles.get(b.node_id)
            role = answer.role if answer is not None else "unreachable"
        fenced = "true" if b.fenced else "false"
        print(
            f"Node: {b.node_id}\tAddress: {b.host}:{b.port}\tFenced: {fenced}\tRole: {role}",
            file=out,
        )
    return 0
