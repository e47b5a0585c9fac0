"""The pure authorizer against Kafka's StandardAuthorizer rules, with hypothesis:
a DENY that applies always wins, an ALLOW that applies grants, implied operations,
super users, and the no-ACL default."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.node.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    applies,
)
from seglog.node.security.authorizer import AuthorizerSettings, allowed_on_any, authorize

NAMES = st.sampled_from(["orders", "orders-eu", "ord", "payments", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
OPS = st.sampled_from(
    [
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DESCRIBE,
        AclOperation.ALL,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    ]
)
BINDINGS = st.builds(
    AclBinding,
    st.just(ResourceType.TOPIC),
    NAMES,
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    PRINCIPALS,
    st.sampled_from(["*", "10.0.0.1"]),
    OPS,
    st.sampled_from([PermissionType.ALLOW, PermissionType.DENY]),
)
REQUESTS = st.tuples(
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(
        [
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
        ]
    ),
    st.sampled_from(["orders", "orders-eu", "payments", "other"]),
)


def _applies_to(b: AclBinding, principal: str, host: str, op: AclOperation, name: str) -> bool:
    implied = {
        AclOperation.DESCRIBE: {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.ALTER,
            AclOperation.DELETE,
        },
        AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS},
    }.get(op, set())
    op_ok = b.operation in (op, AclOperation.ALL) or (
        b.permission == PermissionType.ALLOW and b.operation in implied
    )
    return (
        applies(b, name)
        and b.principal in (principal, "User:*")
        and b.host in (host, "*")
        and op_ok
    )


@settings(max_examples=300, deadline=None)
@given(bindings=st.lists(BINDINGS, max_size=8), request=REQUESTS, default=st.booleans())
def test_decision_follows_the_standard_rules(bindings, request, default):
    principal, host, op, name = request
    s = AuthorizerSettings(frozenset(), default)
    got = authorize(s, bindings, principal, host, op, ResourceType.TOPIC, name)
    matching = [b for b in bindings if _applies_to(b, principal, host, op, name)]
    if any(b.permission == PermissionType.DENY for b in matching):
        assert got is False  # deny wins
    elif matching:
        assert got is True
    elif any(applies(b, name) for b in bindings):
        assert got is False  # ACLs exist on the resource, none for this request
    else:
        assert got is default


@settings(max_examples=100, deadline=None)
@given(bindings=st.lists(BINDINGS, max_size=8), request=REQUESTS)
def test_super_users_may_do_anything(bindings, request):
    principal, host, op, name = request
    s = AuthorizerSettings(frozenset({principal}), False)
    assert authorize(s, bindings, principal, host, op, ResourceType.TOPIC, name)
    assert allowed_on_any(s, bindings, principal, host, op, ResourceType.TOPIC)


def test_deny_overrides_allow_and_prefixes():
    s = AuthorizerSettings()
    allow = AclBinding(
        ResourceType.TOPIC,
        "orders",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.WRITE,
        PermissionType.ALLOW,
    )
    deny = AclBinding(
        ResourceType.TOPIC,
        "orders-eu",
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        PermissionType.DENY,
    )
    args = ("User:alice", "1.2.3.4", AclOperation.WRITE, ResourceType.TOPIC)
    assert authorize(s, [allow, deny], args[0], args[1], args[2], args[3], "orders-us")
    assert not authorize(s, [allow, deny], args[0], args[1], args[2], args[3], "orders-eu")
    assert authorize(
        s, [allow], "User:alice", "h", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders-x"
    )  # WRITE implies DESCRIBE
    assert not authorize(
        s, [allow], "User:bob", "h", AclOperation.WRITE, ResourceType.TOPIC, "orders-x"
    )
    assert allowed_on_any(s, [allow, deny], *args)
    wide = AclBinding(
        ResourceType.TOPIC,
        "ord",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.WRITE,
        PermissionType.DENY,
    )
    assert not allowed_on_any(s, [allow, wide], *args)


def test_filters():
    b = AclBinding(
        ResourceType.TOPIC,
        "orders",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.READ,
        PermissionType.ALLOW,
    )
    assert AclFilter().matches(b)
    assert AclFilter(resource_name="orders", pattern_type=PatternType.PREFIXED).matches(b)
    assert not AclFilter(resource_name="orders", pattern_type=PatternType.LITERAL).matches(b)
    assert AclFilter(resource_name="orders-1", pattern_type=PatternType.MATCH).matches(b)
    assert not AclFilter(principal="User:bob").matches(b)
    assert AclFilter(operation=AclOperation.READ, permission=PermissionType.ALLOW).matches(b)
