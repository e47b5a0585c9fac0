"""Kafka's StandardAuthorizer decision, pure: may `principal` from `host` perform
`operation` on a resource, given the ACL bindings?

- a super user (`super.users`) may do anything;
- the bindings that apply are those of the resource's type whose pattern covers its
  name (a literal name, the literal wildcard `*`, or a prefix) and whose principal
  (or `User:*`) and host (or `*`) match;
- among those for the operation (or ALL), a DENY wins over any ALLOW;
- READ, WRITE, DELETE and ALTER allowed imply DESCRIBE allowed, ALTER_CONFIGS
  allowed implies DESCRIBE_CONFIGS allowed (deny never implies);
- no binding at all on the resource: `allow.everyone.if.no.acl.found` decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    applies,
)

IMPLIES_DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER)


@dataclass(frozen=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuthorizerSettings:
        supers = frozenset(
            p.strip() for p in (props.get("super.users") or "").split(";") if p.strip()
        )
        raw = (props.get("allow.everyone.if.no.acl.found") or "false").strip().lower()
        if raw not in ("true", "false"):
            raise ValueError(
                f"Invalid value {raw} for configuration allow.everyone.if.no.acl.found: "
                "Expected value to be either true or false"
            )
        return cls(supers, raw == "true")


def _grants(b: AclBinding, operation: AclOperation) -> bool:
    if b.operation in (operation, AclOperation.ALL):
        return True
    if b.permission != PermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return b.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return b.operation == AclOperation.ALTER_CONFIGS
    return False


def _speaks_of(b: AclBinding, principal: str, host: str, operation: AclOperation) -> bool:
    """Is binding `b` about this principal on this host, for (or implying) `operation`?"""
    return (
        b.principal in (principal, WILDCARD_PRINCIPAL)
        and b.host in (host, WILDCARD)
        and _grants(b, operation)
    )


def authorize(
    settings: AuthorizerSettings,
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
) -> bool:
    if principal in settings.super_users:
        return True
    on_resource = False
    allowed = False
    for b in bindings:
        if b.resource_type != resource_type or not applies(b, resource_name):
            continue
        on_resource = True
        if not _speaks_of(b, principal, host, operation):
            continue
        if b.permission == PermissionType.DENY:
            return False
        allowed = True
    if not on_resource:
        return settings.allow_everyone_if_no_acl_found
    return allowed


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does `deny` deny every resource that `allow` allows?"""
    if deny.pattern_type == PatternType.LITERAL:
        if deny.resource_name == WILDCARD:
            return True
        literal = allow.pattern_type == PatternType.LITERAL
        return literal and allow.resource_name == deny.resource_name
    return allow.resource_name.startswith(deny.resource_name)


def allowed_on_any(
    settings: AuthorizerSettings,
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """Kafka's authorizeByResourceType: is `operation` allowed on at least one resource
    of the type (an idempotent producer needs WRITE on some topic)? Some ALLOW must
    remain that no DENY covers whole."""
    if principal in settings.super_users:
        return True
    of_type = [b for b in bindings if b.resource_type == resource_type]
    relevant = [b for b in of_type if _speaks_of(b, principal, host, operation)]
    denies = [b for b in relevant if b.permission == PermissionType.DENY]
    for allow in relevant:
        if allow.permission == PermissionType.ALLOW and not any(_covers(d, allow) for d in denies):
            return True
    return settings.allow_everyone_if_no_acl_found and not of_type
