"""The node as a Kafka listener's admin handlers see it: each topic operation is
first authorized for the connection whose request is being handled (Kafka's rules:
CREATE on the cluster or the topic, DELETE, ALTER for new partitions,
DESCRIBE_CONFIGS, ALTER_CONFIGS), and a refusal is the ControlError the handlers
already turn into a per-topic error (TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.controller.cluster_control import ControlError

from .acls import CLUSTER_NAME, AclOperation, ResourceType
from .kafka_gate import allowed
from .node_authorizer import NodeAuthorizer


class AuthorizingNode:
    def __init__(self, node: Any, authorizer: Callable[[], NodeAuthorizer | None]) -> None:
        self._node = node
        self._authorizer = authorizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)

    def _check(self, operation: AclOperation, topic: str) -> None:
        if not allowed(self._authorizer(), operation, ResourceType.TOPIC, topic):
            raise ControlError(
                "TOPIC_AUTHORIZATION_FAILED",
                f"not authorized to {operation.name} topic {topic!r}",
            )

    def may_describe(self, topic: str) -> bool:
        return allowed(self._authorizer(), AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    def create_topic(self, name: str, *args: Any) -> str:
        if not allowed(self._authorizer(), AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
            self._check(AclOperation.CREATE, name)
        return str(self._node.create_topic(name, *args))

    def delete_topic(self, name: str) -> None:
        self._check(AclOperation.DELETE, name)
        self._node.delete_topic(name)

    def create_partitions(self, name: str, *args: Any) -> None:
        self._check(AclOperation.ALTER, name)
        self._node.create_partitions(name, *args)

    def describe_topic_config(self, topic: str) -> Any:
        self._check(AclOperation.DESCRIBE_CONFIGS, topic)
        return self._node.describe_topic_config(topic)

    def alter_broker_configs(self, broker: str, *args: Any) -> None:
        """Broker configs (one broker's or the cluster default): ALTER_CONFIGS on the
        cluster, as Kafka."""
        op = AclOperation.ALTER_CONFIGS
        if not allowed(self._authorizer(), op, ResourceType.CLUSTER, CLUSTER_NAME):
            raise ControlError(
                "CLUSTER_AUTHORIZATION_FAILED", "not authorized to ALTER_CONFIGS on the cluster"
            )
        self._node.alter_broker_configs(broker, *args)

    def alter_configs(self, topic: str, *args: Any) -> None:
        self._check(AclOperation.ALTER_CONFIGS, topic)
        self._node.alter_configs(topic, *args)
