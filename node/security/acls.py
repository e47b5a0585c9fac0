"""Kafka's ACL vocabulary: resource types, pattern types, operations and permission
types with Kafka's wire codes and names, an ACL binding, and the filters that
DescribeAcls/DeleteAcls match bindings with."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka's
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


def camel(name: str) -> str:
    """READ → Read, CLUSTER_ACTION → ClusterAction, TRANSACTIONAL_ID → TransactionalId
    (the names kafka-acls prints)."""
    return "".join(part.capitalize() for part in name.split("_"))


def parse_enum(cls: type[E], text: str, what: str) -> E:
    """Kafka's spellings: `Read`, `READ`, `read`, `ClusterAction`, `cluster-action`."""
    key = text.strip().replace("-", "_")
    for member in cls:
        if key.upper() == member.name or key == camel(member.name):
            return member
    names = ", ".join(camel(m.name) for m in cls if m.name not in ("UNKNOWN", "ANY", "MATCH"))
    raise ValueError(f"{what} {text!r} is not one of {names}")


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an address
    operation: AclOperation
    permission: PermissionType  # ALLOW or DENY

    def wire_fields(self) -> dict[str, int | str]:
        """Its fields as Kafka's ACL messages and seglog's AclBinding proto name them."""
        return {
            "resource_type": int(self.resource_type),
            "resource_name": self.resource_name,
            "pattern_type": int(self.pattern_type),
            "principal": self.principal,
            "host": self.host,
            "operation": int(self.operation),
            "permission_type": int(self.permission),
        }

    def check(self) -> str | None:
        """Why this binding cannot be stored (Kafka's CreateAcls checks), or None."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return "the resource type must be specific"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "the pattern type must be LITERAL or PREFIXED"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return "the operation must be specific"
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            return "the permission type must be ALLOW or DENY"
        if not self.resource_name:
            return "the resource name is empty"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the cluster resource is named {CLUSTER_NAME}"
        kind, colon, name = self.principal.partition(":")
        if not colon or not kind or not name:
            return f"principal {self.principal!r} is not TYPE:NAME"
        if not self.host:
            return "the host is empty"
        return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """None: any. `pattern_type` ANY matches either; MATCH matches the bindings that
    apply to the literal resource name (literal, wildcard and prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not applies(b, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != AclOperation.ANY and b.operation != self.operation:
            return False
        return not (self.permission != PermissionType.ANY and b.permission != self.permission)


def applies(b: AclBinding, resource_name: str) -> bool:
    """Does binding `b` cover a resource of its type named `resource_name`?"""
    if b.pattern_type == PatternType.LITERAL:
        return b.resource_name in (resource_name, WILDCARD)
    return resource_name.startswith(b.resource_name)
