"""`seglog configs` for users' SCRAM credentials (like kafka-configs --entity-type
users) and `seglog acls` (like kafka-acls), over seglog's gRPC `Security` service.

    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    seglog configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice]
    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    seglog acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read \\
        --topic orders [--resource-pattern-type prefixed]
    seglog acls --bootstrap-server H:P --list [--topic orders] [--principal User:alice]
    seglog acls --bootstrap-server H:P --remove --topic orders --deny-principal User:bob

The password is salted here (PBKDF2 with a random salt); only the salt and the salted
password travel, as Kafka's AlterUserScramCredentials."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from .arguments import add_actions, bootstrap_servers, security_options

if TYPE_CHECKING:
    from seglog.node.security.acls import AclBinding, AclFilter

SALT_BYTES = 32
_ITEM = re.compile(r"^\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*$")


def _stub(args: argparse.Namespace) -> tuple[Any, float]:
    """A Security stub on the first bootstrap node that answers."""

    from seglog.client.cluster import CHANNEL_OPTIONS, parse_bootstrap
    from seglog.client.security import ClientSecurity
    from seglog.proto import security_pb2_grpc

    (host, port), *_ = parse_bootstrap(bootstrap_servers(args))
    security = ClientSecurity.from_options(security_options(args))
    channel = security.channel(f"{host}:{port}", CHANNEL_OPTIONS)
    return security_pb2_grpc.SecurityStub(channel), args.request_timeout_ms / 1000


def _rpc(fn: Any, request: Any, timeout_s: float) -> Any:
    import grpc

    try:
        return fn(request, timeout=timeout_s)
    except grpc.RpcError as e:
        raise OSError(f"{e.code().name}: {e.details()}") from None  # type: ignore[attr-defined]


def _error(code: int) -> str:
    from seglog.proto import errors_pb2

    try:
        return errors_pb2.ErrorCode.Name(code)
    except ValueError:
        return f"error {code}"


# --- configs --entity-type users ------------------------------------------------------


def _quotas(args: argparse.Namespace) -> bool:
    """Client quotas (else SCRAM credentials, topics or brokers): clients, users with
    clients, a users --describe (quotas, then SCRAM credentials, as kafka-configs), or
    users altered with quota keys."""
    types = args.entity_types
    if "clients" in types or len(types) > 1:
        return True
    if types != ["users"]:
        return False
    if args.describe:
        return True
    text = f"{args.add_config or ''},{args.delete_config or ''}"
    scram = "SCRAM-SHA-" in text
    if scram and any(key in text for key in ("_rate", "request_percentage")):
        raise ValueError("give SCRAM credentials and quotas in separate --alter commands")
    return not scram


def parse_scram_items(text: str) -> list[tuple[str, int, str]]:
    """`SCRAM-SHA-256=[iterations=8192,password=p],SCRAM-SHA-512=[password=q]` →
    [(mechanism, iterations, password)]."""
    from seglog.node.security.scram import DEFAULT_ITERATIONS, check_iterations

    items = re.findall(r"[^,\[]+=\[[^\]]*\]|[^,]+", text)
    out = []
    for item in items:
        m = _ITEM.match(item)
        if m is None:
            raise ValueError(
                f"--add-config {item!r}: expected SCRAM-SHA-256=[password=...] or "
                "SCRAM-SHA-512=[iterations=N,password=...]"
            )
        fields = dict(p.split("=", 1) for p in m.group(2).split(",") if "=" in p)
        unknown = set(fields) - {"password", "iterations"}
        if unknown or "password" not in fields:
            raise ValueError(f"--add-config {item!r}: takes password= and optionally iterations=")
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        check_iterations(m.group(1), iterations)
        out.append((m.group(1), iterations, fields["password"]))
    return out


def run_configs(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.node.security.scram import MECHANISM_CODES, MECHANISM_NAMES, salted_password
    from seglog.proto import security_pb2 as spb

    out = out or sys.stdout
    names = list(args.entity_names or [])
    args.entity_type = args.entity_types[0]
    args.entity_name = names[0] if names and names[0] is not None else None
    args.entity_default = bool(names) and names[0] is None
    if _quotas(args):
        from . import quota_configs

        stub, timeout = _stub(args)
        status = quota_configs.run(args, stub, timeout, out, _rpc, _error)
        if not (args.describe and args.entity_type == "users" and len(args.entity_types) == 1):
            return status
        if args.entity_default or status:
            return status  # the default user has no SCRAM credentials
    if args.entity_type == "brokers":
        from . import broker_configs

        return broker_configs.run(args, out)
    if args.entity_type == "topics":
        from . import topic_configs

        return topic_configs.run(args, out)
    stub, timeout = _stub(args)
    if args.describe:
        users = [args.entity_name] if args.entity_name else []
        r = _rpc(
            stub.DescribeUserScramCredentials,
            spb.DescribeUserScramCredentialsRequest(users=users),
            timeout,
        )
        failed = 0
        for u in r.results:
            if u.error_code and _error(u.error_code) == "RESOURCE_NOT_FOUND":
                continue  # kafka-configs: a user may have quotas and no credentials
            if u.error_code:
                print(f"{u.user}: {_error(u.error_code)}: {u.error_message}", file=sys.stderr)
                failed += 1
                continue
            creds = ",".join(
                f"{MECHANISM_NAMES.get(c.mechanism, c.mechanism)}=iterations={c.iterations}"
                for c in u.credentials
            )
            print(f"SCRAM credential configs for user-principal '{u.user}' are {creds}", file=out)
        return 1 if failed else 0
    if not args.entity_name:
        raise ValueError("--alter needs --entity-name")
    request = spb.AlterUserScramCredentialsRequest()
    for mechanism, iterations, password in parse_scram_items(args.add_config or ""):
        salt = os.urandom(SALT_BYTES)
        request.upsertions.append(
            spb.ScramUpsertion(
                name=args.entity_name,
                mechanism=MECHANISM_CODES[mechanism],
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mechanism, password.encode(), salt, iterations),
            )
        )
    for name in (n.strip() for n in (args.delete_config or "").split(",") if n.strip()):
        if name not in MECHANISM_CODES:
            raise ValueError(f"--delete-config {name!r}: SCRAM-SHA-256 or SCRAM-SHA-512")
        request.deletions.append(
            spb.ScramDeletion(name=args.entity_name, mechanism=MECHANISM_CODES[name])
        )
    if not request.upsertions and not request.deletions:
        raise ValueError("--alter needs --add-config or --delete-config")
    r = _rpc(stub.AlterUserScramCredentials, request, timeout)
    for u in r.results:
        if u.error_code:
            print(
                f"seglog configs: {u.user}: {_error(u.error_code)}: {u.error_message}",
                file=sys.stderr,
            )
            return 1
    print(f"Completed updating config for user {args.entity_name}.", file=out)
    return 0


# --- acls ---------------------------------------------------------------------------


def _resources(args: argparse.Namespace) -> list[tuple[Any, str]]:
    from seglog.node.security.acls import CLUSTER_NAME, ResourceType

    out: list[tuple[Any, str]] = []
    out += [(ResourceType.TOPIC, t) for t in args.topic or []]
    out += [(ResourceType.GROUP, g) for g in args.group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    from seglog.node.security.acls import (
        AclBinding,
        AclOperation,
        PatternType,
        PermissionType,
        ResourceType,
        parse_enum,
    )

    pattern = parse_enum(PatternType, args.resource_pattern_type or "literal", "pattern type")
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("--add takes --resource-pattern-type literal or prefixed")
    resources = _resources(args)
    if not resources:
        raise ValueError("--add needs a resource: --topic, --group, --transactional-id, --cluster")
    per_type: dict[Any, list[Any]] = {}
    if args.producer:
        per_type[ResourceType.TOPIC] = [
            AclOperation.WRITE,
            AclOperation.DESCRIBE,
            AclOperation.CREATE,
        ]
        if args.idempotent:
            resources.append((ResourceType.CLUSTER, "kafka-cluster"))
            per_type[ResourceType.CLUSTER] = [AclOperation.IDEMPOTENT_WRITE]
    if args.consumer:  # with --producer too: both sets of operations
        per_type[ResourceType.TOPIC] = [
            *per_type.get(ResourceType.TOPIC, []),
            AclOperation.READ,
            AclOperation.DESCRIBE,
        ]
        per_type[ResourceType.GROUP] = [AclOperation.READ]
    operations = [parse_enum(AclOperation, o, "operation") for o in args.operation or []]
    if not operations and not per_type:
        raise ValueError("--add needs --operation (or --producer / --consumer)")
    entries = [
        (PermissionType.ALLOW, p, args.allow_host or ["*"]) for p in args.allow_principal or []
    ]
    entries += [
        (PermissionType.DENY, p, args.deny_host or ["*"]) for p in args.deny_principal or []
    ]
    if not entries:
        raise ValueError("--add needs --allow-principal or --deny-principal")
    out = []
    for permission, principal, hosts in entries:
        for rtype, name in resources:
            for op in per_type.get(rtype, operations):
                for host in hosts:
                    out.append(AclBinding(rtype, name, pattern, principal, host, op, permission))
    return sorted(set(out))


def _filters(args: argparse.Namespace) -> list[AclFilter]:
    from seglog.node.security.acls import (
        AclFilter,
        AclOperation,
        PatternType,
        PermissionType,
        ResourceType,
        parse_enum,
    )

    pattern = parse_enum(
        PatternType,
        args.resource_pattern_type or ("any" if args.list else "literal"),
        "pattern type",
    )
    resources: list[tuple[Any, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    principals: list[tuple[Any, str | None]] = [
        (PermissionType.ALLOW, p) for p in args.allow_principal or []
    ] + [(PermissionType.DENY, p) for p in args.deny_principal or []]
    if args.principal:
        principals += [(PermissionType.ANY, p) for p in args.principal]
    principals = principals or [(PermissionType.ANY, None)]
    operations = [parse_enum(AclOperation, o, "operation") for o in args.operation or []] or [
        AclOperation.ANY
    ]
    return [
        AclFilter(rtype, name, pattern, principal, None, op, permission)
        for rtype, name in resources
        for permission, principal in principals
        for op in operations
    ]


def _print_bindings(bindings: list[AclBinding], out: TextIO) -> None:
    from seglog.node.security.acls import camel

    resources: dict[tuple[str, str, str], list[AclBinding]] = {}
    for b in bindings:
        key = (camel(b.resource_type.name), b.resource_name, b.pattern_type.name)
        resources.setdefault(key, []).append(b)
    for (rtype, name, pattern), group in sorted(resources.items()):
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={rtype.upper()}, "
            f"name={name}, patternType={pattern})`: ",
            file=out,
        )
        for b in group:
            print(
                f" \t(principal={b.principal}, host={b.host}, "
                f"operation={b.operation.name}, permissionType={b.permission.name})",
                file=out,
            )
        print(file=out)


def run_acls(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.node.security.security_servicer import (
        binding_from_proto,
        binding_to_proto,
        filter_to_proto,
    )
    from seglog.proto import security_pb2 as spb

    out = out or sys.stdout
    stub, timeout = _stub(args)
    if args.add:
        bindings = _bindings(args)
        r = _rpc(
            stub.CreateAcls,
            spb.CreateAclsRequest(creations=[binding_to_proto(b) for b in bindings]),
            timeout,
        )
        failed = [(b, x) for b, x in zip(bindings, r.results, strict=False) if x.error_code]
        for b, x in failed:
            print(f"seglog acls: {_error(x.error_code)}: {x.error_message} ({b})", file=sys.stderr)
        if failed:
            return 1
        print(f"Adding ACLs: {len(bindings)}", file=out)
        _print_bindings(bindings, out)
        return 0
    if args.list:
        found: list[AclBinding] = []
        for f in _filters(args):
            r = _rpc(stub.DescribeAcls, filter_to_proto(f), timeout)
            if r.error_code:
                raise OSError(f"{_error(r.error_code)}: {r.error_message}")
            found += [binding_from_proto(b) for b in r.bindings]
        _print_bindings(sorted(set(found)), out)
        return 0
    filters = _filters(args)
    if not _resources(args) and not args.force:
        raise ValueError("--remove without a resource removes every ACL: add --force")
    r = _rpc(
        stub.DeleteAcls,
        spb.DeleteAclsRequest(filters=[filter_to_proto(f) for f in filters]),
        timeout,
    )
    removed: list[AclBinding] = []
    for x in r.results:
        if x.error_code:
            raise OSError(f"{_error(x.error_code)}: {x.error_message}")
        removed += [binding_from_proto(b) for b in x.matching]
    print(f"Removed ACLs: {len(set(removed))}", file=out)
    _print_bindings(sorted(set(removed)), out)
    return 0


def add_configs_arguments(c: argparse.ArgumentParser) -> None:
    add_actions(c, {"--alter": None, "--describe": None})
    c.add_argument(
        "--entity-type",
        dest="entity_types",
        action="append",
        required=True,
        choices=["users", "clients", "topics", "brokers"],
        help="users and clients together: a (user, client-id) quota",
    )
    c.add_argument(
        "--entity-name",
        dest="entity_names",
        action="append",
        help="the user, the client id, the topic, or the broker id",
    )
    c.add_argument(
        "--entity-default",
        dest="entity_names",
        action="append_const",
        const=None,
        help="brokers: the cluster-wide default; users, clients: the default quota",
    )
    c.add_argument("--all", action="store_true", help="topics, brokers --describe: every config")
    c.add_argument(
        "--add-config",
        help="users: 'SCRAM-SHA-256=[iterations=8192,password=...]' or quotas; clients: "
        "quotas (producer_byte_rate=N,consumer_byte_rate=N,request_percentage=P,"
        "controller_mutation_rate=R); topics, brokers: k=v,k2=v2",
    )
    c.add_argument(
        "--delete-config",
        help="users: SCRAM-SHA-256 and/or SCRAM-SHA-512, or quota keys; clients: quota keys; "
        "topics, brokers: config names; comma-separated",
    )


def add_acls_arguments(a: argparse.ArgumentParser) -> None:
    add_actions(a, {"--add": None, "--list": None, "--remove": None})
    a.add_argument("--topic", action="append", help="a topic (repeatable)")
    a.add_argument("--group", action="append", help="a consumer group (repeatable)")
    a.add_argument("--transactional-id", action="append")
    a.add_argument("--cluster", action="store_true", help="the cluster resource")
    a.add_argument(
        "--resource-pattern-type",
        help="literal (default for --add/--remove), prefixed, any (default for --list), match",
    )
    a.add_argument("--allow-principal", action="append", metavar="User:NAME")
    a.add_argument("--deny-principal", action="append", metavar="User:NAME")
    a.add_argument("--allow-host", action="append", metavar="HOST")
    a.add_argument("--deny-host", action="append", metavar="HOST")
    a.add_argument("--principal", action="append", help="--list: only this principal's ACLs")
    a.add_argument(
        "--operation",
        action="append",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, All (repeatable)",
    )
    a.add_argument("--producer", action="store_true", help="Write, Describe, Create on --topic")
    a.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite")
    a.add_argument(
        "--consumer", action="store_true", help="Read, Describe on --topic, Read --group"
    )
    a.add_argument("--force", action="store_true", help="--remove without a resource")
