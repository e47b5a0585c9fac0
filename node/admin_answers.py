"""The answers the broker's gRPC service (node/servicer.py) and the controller
process's (node/controller/controller_servicer.py) both give to ElectLeaders and
AlterPartitionReassignments: a module of its own so that the controller process does
not import the broker's service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from seglog.controller.cluster_control import ControlError
from seglog.proto import client_pb2 as pb

from .grpc_errors import code, refused

R = TypeVar("R")


def answer_election(
    elect: Callable[[], dict[tuple[str, int], str]],
    response: Callable[..., R],
    result: Callable[..., Any],
) -> R:
    """ElectLeaders on the broker's and the controller's service: the controller's
    refusal, or each partition's error (`elect` decides; their messages differ)."""
    try:
        results = elect()
    except ControlError as e:
        return response(**refused(e))
    return response(
        results=[
            result(topic=t, partition=p, error_code=code(error))
            for (t, p), error in sorted(results.items())
        ]
    )


def answer_reassignments(
    request: pb.AlterPartitionReassignmentsRequest,
    alter: Callable[
        [list[tuple[str, int, tuple[int, ...] | None]]], dict[tuple[str, int], tuple[str, str]]
    ],
) -> pb.AlterPartitionReassignmentsResponse:
    """AlterPartitionReassignments on the broker's and the controller's service: each
    partition's target replicas, or a cancel; `alter` decides."""
    wanted = [
        (r.topic, r.partition, None if r.cancel else tuple(r.replicas)) for r in request.partitions
    ]
    try:
        results = alter(wanted)
    except ControlError as e:
        return pb.AlterPartitionReassignmentsResponse(**refused(e))
    return pb.AlterPartitionReassignmentsResponse(
        results=[
            pb.PartitionReassignment(
                topic=t, partition=p, error_code=code(error), error_message=message
            )
            for (t, p), (error, message) in sorted(results.items())
        ]
    )
