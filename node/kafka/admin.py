"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, Alter/ListPartitionReassignments and ElectLeaders: Kafka's admin
requests onto the node's controller calls (which forward to the active controller
as the gRPC service's do)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from seglog.controller.cluster_control import (
    DYNAMIC_BROKER_CONFIGS,
    PREFERRED,
    UNCLEAN,
    ControlError,
)
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import TOPIC_CONFIG_KEYS, ConfigType
from seglog.storage.partition_metadata import topic_id_to_uuid

from ..event_log import EventLogger
from . import config_entries, group_configs
from .client_quotas import THROTTLED_MESSAGE, MutationQuota
from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .node_api import KafkaNode

_log = EventLogger("kafka")
TOPIC = 2
BROKER = 4
GROUP = group_configs.GROUP
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations
DEFAULT_CONFIG = 5


def create_topics(
    node: KafkaNode, request: KafkaRequest, quota: MutationQuota | None = None
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    names = [t.name for t in req.topics]
    results = []
    for t in req.topics:
        # A manual assignment (Kafka: with -1 for both counts) gives both.
        assignments = [(a.partition_index, tuple(a.broker_ids)) for a in t.assignments or ()]
        partitions = t.num_partitions if t.num_partitions != -1 else node.num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else node.default_replication_factor
        if assignments:
            partitions, rf = t.num_partitions, t.replication_factor  # checked as Kafka does
        result = cls.CreatableTopicResult(
            name=t.name,
            error_code=0,
            num_partitions=len(assignments) if assignments else partitions,
            replication_factor=len(assignments[0][1]) if assignments else rf,
        )
        if names.count(t.name) > 1:
            result.error_code = error_code("INVALID_REQUEST")
            result.error_message = f"topic {t.name!r} appears more than once in the request"
        elif not _taken(quota, req, result.num_partitions):
            result.error_code = error_code("THROTTLING_QUOTA_EXCEEDED")
            result.error_message = THROTTLED_MESSAGE
        else:
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            try:
                topic_id = node.create_topic(
                    t.name, partitions, rf, configs, req.validate_only, assignments
                )
                if topic_id:
                    with contextlib.suppress(ValueError):
                        result.topic_id = topic_id_to_uuid(topic_id)
            except ControlError as e:
                result.error_code, result.error_message = error_code(e.error_name), str(e)
            except InvalidConfigError as e:
                result.error_code, result.error_message = error_code("INVALID_CONFIG"), str(e)
        if result.error_code:
            result.num_partitions, result.replication_factor = -1, -1
        results.append(result)
    return encode_response(request, cls(throttle_time_ms=request.throttle_ms, topics=results))


def _taken(quota: MutationQuota | None, req: Any, partitions: int) -> bool:
    """controller_mutation_rate: may these partitions be created or deleted?"""
    return quota is None or bool(getattr(req, "validate_only", False)) or quota.take(partitions)


def delete_topics(
    node: KafkaNode, request: KafkaRequest, quota: MutationQuota | None = None
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    image = node.metadata_image()
    if request.api_version >= 6:
        wanted = []
        for t in req.topics:
            name = t.name
            if name is None and t.topic_id is not None:
                for tname, topic in image.topics.items():
                    try:
                        if topic_id_to_uuid(topic.topic_id) == t.topic_id:
                            name = tname
                    except ValueError:
                        continue
            wanted.append((name, t.topic_id))
    else:
        wanted = [(name, None) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        result = cls.DeletableTopicResult(name=name, error_code=0)
        if request.api_version >= 6:
            result.topic_id = topic_id
        if name is None:
            result.error_code = error_code("UNKNOWN_TOPIC_ID")
        else:
            topic = image.topics.get(name)
            if topic is not None and request.api_version >= 6 and result.topic_id is None:
                result.topic_id = topic_id_to_uuid(topic.topic_id)
            if topic is not None and not _taken(quota, req, len(topic.partitions)):
                result.error_code = error_code("THROTTLING_QUOTA_EXCEEDED")
                result.error_message = THROTTLED_MESSAGE
                results.append(result)
                continue
            try:
                node.delete_topic(name)
            except ControlError as e:
                result.error_code, result.error_message = error_code(e.error_name), str(e)
        results.append(result)
    return encode_response(request, cls(throttle_time_ms=request.throttle_ms, responses=results))


def create_partitions(
    node: KafkaNode, request: KafkaRequest, quota: MutationQuota | None = None
) -> list[Part]:
    """Grow topics to the requested partition counts: the new partitions placed as a
    new topic's would be, or by the request's assignments (one replica list per new
    partition, checked as Kafka checks them)."""
    req = request.body
    cls = response_class(request)
    results = []
    names = [t.name for t in req.topics]
    for t in req.topics:
        code, message = 0, None
        assignments = (
            None if t.assignments is None else [tuple(a.broker_ids) for a in t.assignments]
        )
        topic = node.metadata_image().topics.get(t.name)
        if names.count(t.name) > 1:
            code = error_code("INVALID_REQUEST")
            message = f"topic {t.name!r} appears more than once in the request"
        elif topic is not None and not _taken(quota, req, t.count - len(topic.partitions)):
            code, message = error_code("THROTTLING_QUOTA_EXCEEDED"), THROTTLED_MESSAGE
        else:
            try:
                node.create_partitions(t.name, t.count, bool(req.validate_only), assignments)
            except ControlError as e:
                code, message = error_code(e.error_name), str(e)
        results.append(
            cls.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
        )
    return encode_response(request, cls(throttle_time_ms=request.throttle_ms, results=results))


def sensitive(name: str) -> bool:
    """A broker setting whose value is never answered (Kafka's PASSWORD-type configs:
    the JAAS users' passwords, keys, the token secret)."""
    return (
        "password" in name
        or name.endswith(("sasl.jaas.config", "ssl.keystore.key"))
        or name.startswith("delegation.token.")
        and name.endswith((".secret.key", ".master.key"))
    )


def describe_configs(
    node: KafkaNode,
    request: KafkaRequest,
    may_describe_broker: Callable[[], bool] = lambda: True,
    may_group: Callable[[bool, str], bool] = lambda _alter, _group: True,
) -> list[Part]:
    """Every config of each resource, as Kafka's ConfigHelper answers (config_entries.py):
    a topic's from its overrides, the broker's layers and the defaults; the BROKER
    resource of this node with every broker config; the BROKER resource "" with the
    cluster's dynamic defaults; another broker's id is INVALID_REQUEST (its own node
    answers for it). Topic configs need DESCRIBE_CONFIGS on the topic (the guarded node
    checks it), broker ones on the cluster (else CLUSTER_AUTHORIZATION_FAILED)."""
    req = request.body
    v = request.api_version
    cls = response_class(request)
    entry_cls = cls.DescribeConfigsResult.DescribeConfigsResourceResult
    synonym_cls = entry_cls.DescribeConfigsSynonym
    with_synonyms = bool(getattr(req, "include_synonyms", False)) and v >= 1
    with_docs = bool(getattr(req, "include_documentation", False)) and v >= 3
    own_id = str(node.node_id)
    results = []
    for resource in req.resources:
        result = cls.DescribeConfigsResult(
            error_code=0,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        wanted = set(resource.configuration_keys or ())
        entries: list[config_entries.Entry] = []
        try:
            if resource.resource_type == TOPIC:
                effective = {
                    n: value for n, value, _s in node.describe_topic_config(resource.resource_name)
                }
                overrides = node.metadata_image().configs.get(resource.resource_name, {})
                entries = config_entries.topic_entries(
                    effective, overrides, config_entries.Layers(*node.broker_config_layers(own_id))
                )
            elif resource.resource_type == GROUP:
                if not may_group(False, resource.resource_name):
                    raise ControlError(
                        "GROUP_AUTHORIZATION_FAILED",
                        f"not authorized to DESCRIBE_CONFIGS on group {resource.resource_name}",
                    )
                entries = group_configs.describe_entries(
                    node, resource.resource_name, node.groups.config.consumer
                )
            elif resource.resource_type == BROKER and not may_describe_broker():
                raise ControlError(
                    "CLUSTER_AUTHORIZATION_FAILED",
                    "not authorized to DESCRIBE_CONFIGS on the cluster",
                )
            elif resource.resource_type == BROKER and resource.resource_name == "":
                _own, default, _static = node.broker_config_layers("")
                entries = config_entries.default_broker_entries(default, sensitive)
            elif resource.resource_type == BROKER and resource.resource_name == own_id:
                layers = config_entries.Layers(*node.broker_config_layers(own_id))
                entries = config_entries.broker_entries(
                    layers, set(DYNAMIC_BROKER_CONFIGS), sensitive
                )
            elif resource.resource_type == BROKER:
                raise ControlError(
                    "INVALID_REQUEST",
                    f"Unexpected broker id, expected {own_id} or empty string, but "
                    f"received {resource.resource_name}",
                )
            else:
                raise ControlError(
                    "INVALID_REQUEST",
                    "only TOPIC, BROKER and GROUP config resources are supported",
                )
        except ControlError as e:
            result.error_code, result.error_message = error_code(e.error_name), str(e)
        for e in entries:
            if wanted and e.name not in wanted:
                continue
            entry = entry_cls(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_default=e.source == config_entries.DEFAULT,
                is_sensitive=e.sensitive,
                synonyms=[
                    synonym_cls(name=s.name, value=s.value, source=s.source)
                    for s in (e.synonyms if with_synonyms else ())
                ],
                config_type=e.config_type,
                documentation=e.documentation if with_docs else None,
            )
            result.configs.append(entry)
        results.append(result)
    return encode_response(request, cls(throttle_time_ms=0, results=results))


def incremental_alter_configs(
    node: KafkaNode,
    request: KafkaRequest,
    may_group: Callable[[bool, str], bool] = lambda _alter, _group: True,
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    results = []
    for resource in req.resources:
        result = _alter_result(cls, resource, may_group)
        if result.error_code:
            results.append(result)
            continue
        changes: dict[str, str | None] = {}
        for c in resource.configs:
            if c.config_operation == SET and c.value is not None:
                changes[c.name] = c.value
            elif c.config_operation == DELETE:
                changes[c.name] = None
            elif c.config_operation in (APPEND, SUBTRACT) and c.value is not None:
                try:
                    changes[c.name] = _list_change(
                        node, resource.resource_type, resource.resource_name, c, changes
                    )
                except ControlError as e:
                    result.error_code, result.error_message = error_code(e.error_name), str(e)
            else:
                result.error_code = error_code("INVALID_CONFIG")
                result.error_message = (
                    f"operation {c.config_operation} on {c.name} needs a value"
                    if c.config_operation in (SET, APPEND, SUBTRACT)
                    else f"unknown operation {c.config_operation} on {c.name}"
                )
        if not result.error_code:
            result.error_code, result.error_message = _alter(
                node, resource.resource_type, resource.resource_name, changes, req.validate_only
            )
        results.append(result)
    return encode_response(request, cls(throttle_time_ms=0, responses=results))


def _alter_result(cls: Any, resource: Any, may_group: Callable[[bool, str], bool]) -> Any:
    """A resource's (Incremental)AlterConfigs answer: INVALID_REQUEST for a resource
    type that cannot be altered, GROUP_AUTHORIZATION_FAILED for a group the caller
    may not ALTER_CONFIGS, else no error yet."""
    result = cls.AlterConfigsResourceResponse(
        error_code=0,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
    if resource.resource_type not in (TOPIC, BROKER, GROUP):
        result.error_code = error_code("INVALID_REQUEST")
        result.error_message = "only TOPIC, BROKER and GROUP config resources can be altered"
    elif resource.resource_type == GROUP and not may_group(True, resource.resource_name):
        result.error_code = error_code("GROUP_AUTHORIZATION_FAILED")
        result.error_message = f"not authorized to ALTER_CONFIGS on group {resource.resource_name}"
    return result


def _list_change(
    node: KafkaNode, rtype: int, name: str, c: Any, earlier: dict[str, str | None]
) -> str:
    """APPEND or SUBTRACT on a LIST config, as Kafka: from the value set (earlier in
    this request, else the resource's dynamic one, else the config's default), the
    items added (each once) or removed."""
    if rtype == GROUP:
        is_list, default, current = False, "", None  # a group's configs are numbers
    elif rtype == TOPIC:
        key = TOPIC_CONFIG_KEYS.get(c.name)
        is_list = key is not None and key.type is ConfigType.LIST
        default = key.render(key.default) if key is not None and key.default is not None else ""
        current = node.metadata_image().configs.get(name, {}).get(c.name)
    else:
        wire_type, catalog_default, _doc = config_entries.broker_catalog().get(
            c.name, (config_entries.UNKNOWN, None, "")
        )
        is_list = wire_type == config_entries.LIST
        default = catalog_default or ""
        own, dynamic_default, _static = node.broker_config_layers(name)
        current = (own if name else dynamic_default).get(c.name)
    op = "append" if c.config_operation == APPEND else "subtract"
    if not is_list:
        raise ControlError(
            "INVALID_CONFIG", f"Config value {op} is not allowed for config key: {c.name}"
        )
    value = earlier.get(c.name, current)
    items = [v for v in (default if value is None else value).split(",") if v]
    given = [v.strip() for v in c.value.split(",") if v.strip()]
    if c.config_operation == APPEND:
        items += [v for v in given if v not in items]
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)


def _alter(
    node: KafkaNode, rtype: int, name: str, changes: dict[str, str | None], validate_only: bool
) -> tuple[int, str | None]:
    """One resource's config changes (a value sets, None deletes): (error code, message)."""
    try:
        if rtype == BROKER:
            node.alter_broker_configs(name, changes, bool(validate_only))
        elif rtype == GROUP:
            group_configs.alter(
                node, name, changes, bool(validate_only), node.groups.config.consumer
            )
        else:
            node.alter_configs(name, changes, bool(validate_only))
    except ControlError as e:
        return error_code(e.error_name), str(e)
    except InvalidConfigError as e:
        return error_code("INVALID_CONFIG"), str(e)
    return 0, None


def alter_configs(
    node: KafkaNode,
    request: KafkaRequest,
    may_group: Callable[[bool, str], bool] = lambda _alter, _group: True,
) -> list[Part]:
    """AlterConfigs (API 33, the non-incremental one): a resource's dynamic configs
    become exactly the ones given, the others are deleted, as in Kafka."""
    req = request.body
    cls = response_class(request)
    results = []
    for resource in req.resources:
        result = _alter_result(cls, resource, may_group)
        given = {c.name: c.value for c in resource.configs}
        nulls = sorted(k for k, v in given.items() if v is None)
        if nulls and not result.error_code:
            result.error_code = error_code("INVALID_REQUEST")
            result.error_message = f"Null value not supported for: {', '.join(nulls)}"
        if not result.error_code:
            name = resource.resource_name
            try:
                if resource.resource_type == TOPIC:
                    current = set(node.metadata_image().configs.get(name, {}))
                elif resource.resource_type == GROUP:
                    current = set(node.metadata_image().group_configs.get(name, {}))
                else:
                    own, default, _static = node.broker_config_layers(name)
                    current = set(own if name else default)
                changes: dict[str, str | None] = dict.fromkeys(current - set(given))
                changes.update(given)
                result.error_code, result.error_message = _alter(
                    node, resource.resource_type, name, changes, req.validate_only
                )
            except ControlError as e:
                result.error_code, result.error_message = error_code(e.error_name), str(e)
        results.append(result)
    return encode_response(request, cls(throttle_time_ms=0, responses=results))


def alter_partition_reassignments(node: KafkaNode, request: KafkaRequest) -> list[Part]:
    """KIP-455: each partition's target replicas, or null to cancel. v1's
    AllowReplicationFactorChange=false refuses a target of another size."""
    req = request.body
    cls = response_class(request)
    allow_rf_change = getattr(req, "allow_replication_factor_change", True)
    image = node.metadata_image()
    wanted: list[tuple[str, int, tuple[int, ...] | None]] = []
    refused: dict[tuple[str, int], tuple[str, str]] = {}
    for t in req.topics:
        for p in t.partitions:
            target = None if p.replicas is None else tuple(p.replicas)
            state = image.partition(t.name, p.partition_index)
            if (
                not allow_rf_change
                and target is not None
                and state is not None
                and len(target) != len(state.original_replicas)
            ):
                refused[(t.name, p.partition_index)] = (
                    "INVALID_REPLICATION_FACTOR",
                    f"{t.name}-{p.partition_index}: the target has {len(target)} replicas, "
                    f"not {len(state.original_replicas)}, and the replication factor may "
                    f"not change",
                )
            else:
                wanted.append((t.name, p.partition_index, target))
    code, message = 0, None
    results: dict[tuple[str, int], tuple[str, str]] = dict(refused)
    try:
        if wanted:
            results.update(node.alter_partition_reassignments(wanted))
    except ControlError as e:
        code, message = error_code(e.error_name), str(e)
    topic_cls = cls.ReassignableTopicResponse
    part_cls = topic_cls.ReassignablePartitionResponse
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            error, why = results.get((t.name, p.partition_index), ("NONE", ""))
            if code:
                error, why = "NONE", ""  # the top-level error says it
            parts.append(
                part_cls(
                    partition_index=p.partition_index,
                    error_code=error_code(error),
                    error_message=why or None,
                )
            )
        responses.append(topic_cls(name=t.name, partitions=parts))
    body = cls(throttle_time_ms=0, error_code=code, error_message=message, responses=responses)
    if request.api_version >= 1:
        body.allow_replication_factor_change = allow_rf_change
    return encode_response(request, body)


def list_partition_reassignments(node: KafkaNode, request: KafkaRequest) -> list[Part]:
    req = request.body
    cls = response_class(request)
    wanted = (
        None
        if req.topics is None
        else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    )
    by_topic: dict[str, list[object]] = {}
    topic_cls = cls.OngoingTopicReassignment
    part_cls = topic_cls.OngoingPartitionReassignment
    for r in node.list_partition_reassignments(wanted):
        by_topic.setdefault(r.topic, []).append(
            part_cls(
                partition_index=r.partition,
                replicas=list(r.replicas),
                adding_replicas=list(r.adding_replicas),
                removing_replicas=list(r.removing_replicas),
            )
        )
    topics = [topic_cls(name=name, partitions=parts) for name, parts in by_topic.items()]
    return encode_response(
        request, cls(throttle_time_ms=0, error_code=0, error_message=None, topics=topics)
    )


def refuse_reassignments(request: KafkaRequest, error: str) -> list[Part]:
    """Either reassignment API refused as a whole (a top-level error)."""
    cls = response_class(request)
    body = cls(
        throttle_time_ms=0,
        error_code=error_code(error),
        error_message=f"{request.spec.name} refused: {error}",
    )
    if request.api_key == 45:
        body.responses = []
        if request.api_version >= 1:
            body.allow_replication_factor_change = True
    else:
        body.topics = []
    return encode_response(request, body)


ELECTION_TYPES = {0: PREFERRED, 1: UNCLEAN}


def elect_leaders(
    node: KafkaNode, request: KafkaRequest, may_alter_cluster: Callable[[], bool]
) -> list[Part]:
    """KIP-460 (API 43 v0-v2): v0 is a preferred election; null partitions mean every
    partition that needs one, and only those are answered (as Kafka); a named partition
    already led by its preferred replica answers ELECTION_NOT_NEEDED. Needs ALTER on the
    cluster (else CLUSTER_AUTHORIZATION_FAILED, top-level from v1 and per partition)."""
    req = request.body
    cls = response_class(request)
    election = ELECTION_TYPES.get(req.election_type if request.api_version >= 1 else 0)
    wanted = (
        None
        if req.topic_partitions is None
        else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    )
    code, message = 0, None
    results: dict[tuple[str, int], str] = {}
    if not may_alter_cluster():
        code, message = error_code("CLUSTER_AUTHORIZATION_FAILED"), "ALTER on the cluster needed"
        results = dict.fromkeys(wanted or [], "CLUSTER_AUTHORIZATION_FAILED")
    elif election is None:
        code, message = error_code("INVALID_REQUEST"), f"election type {req.election_type}"
        results = dict.fromkeys(wanted or [], "INVALID_REQUEST")
    else:
        try:
            results = node.elect_leaders(election, wanted)
        except ControlError as e:
            code, message = error_code(e.error_name), str(e)
            results = dict.fromkeys(wanted or [], e.error_name)
    by_topic: dict[str, list[object]] = {}
    R = cls.ReplicaElectionResult
    for (topic, p), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            R.PartitionResult(
                partition_id=p,
                error_code=error_code(error),
                error_message=None if error == "NONE" else error,
            )
        )
    body = cls(
        throttle_time_ms=0,
        replica_election_results=[R(topic=t, partition_result=ps) for t, ps in by_topic.items()],
    )
    if request.api_version >= 1:
        body.error_code = code  # v0 has none: every partition carries the error
    if message is not None:
        _log.info("kafka_elect_leaders_refused", error=message)
    return encode_response(request, body)
