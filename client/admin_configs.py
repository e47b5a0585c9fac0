"""The Admin's config operations: topic configs and dynamic broker configs
(KIP-226), described and incrementally altered."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seglog.proto import client_pb2 as pb

from .admin_requests import AdminRequests, config_entries, topic_error
from .admin_types import ConfigEntry
from .cluster import call
from .errors import KafkaError, for_code


class ConfigAdmin(AdminRequests):
    def describe_configs(
        self, topic: str, config_names: Iterable[str] | None = None
    ) -> dict[str, ConfigEntry]:
        """The topic's effective configs (every setting unless `config_names`)."""
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.TOPIC, name=topic, config_names=list(config_names or []))
        response: pb.DescribeConfigsResponse = self._rpc(
            "DescribeConfigs", request, lambda r: [x.error_code for x in r.results], False
        )
        result = response.results[0]
        if result.error_code:
            raise topic_error(topic, result.error_code, result.error_message)
        return config_entries(result)

    def describe_configs_of(
        self, topics: Sequence[str], config_names: Iterable[str] | None = None
    ) -> dict[str, dict[str, ConfigEntry] | KafkaError]:
        """Several topics' configs in one request (Kafka's describeConfigs of many
        resources): per topic its configs, or the error the node gave for it."""
        request = pb.DescribeConfigsRequest()
        names = list(config_names or [])
        for topic in topics:
            request.resources.add(type=pb.TOPIC, name=topic, config_names=names)
        response: pb.DescribeConfigsResponse = self._rpc(
            "DescribeConfigs", request, lambda r: [x.error_code for x in r.results], False
        )
        by_name = {r.name: r for r in response.results}
        out: dict[str, dict[str, ConfigEntry] | KafkaError] = {}
        for topic in topics:
            result = by_name.get(topic)
            if result is None:
                out[topic] = KafkaError(f"DescribeConfigs did not answer for topic {topic!r}")
                continue
            if result.error_code:
                out[topic] = topic_error(topic, result.error_code, result.error_message)
                continue
            out[topic] = config_entries(result)
        return out

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Incremental alter (Kafka's incrementalAlterConfigs): set some overrides,
        remove others (they fall back to the broker default); the rest stay."""
        result = self._alter_configs(pb.TOPIC, topic, set, delete, validate_only)
        if result.error_code:
            raise topic_error(topic, result.error_code, result.error_message)

    def _alter_configs(
        self,
        resource_type: int,
        name: str,
        set: Mapping[str, str] | None,
        delete: Iterable[str],
        validate_only: bool,
    ) -> Any:
        """One resource's incremental AlterConfigs; its result (error code and message)."""
        changes = {str(k): str(v) for k, v in (set or {}).items()}
        removed = list(delete)
        both = sorted(changes.keys() & removed)
        if both:
            raise ValueError(f"config {both[0]!r} is both set and deleted")
        if not changes and not removed:
            raise ValueError("nothing to alter: give configs to set or delete")
        request = pb.AlterConfigsRequest(validate_only=validate_only)
        resource = request.resources.add(type=resource_type, name=name)
        for key, value in changes.items():
            resource.configs.add(name=key, op=pb.SET, value=value)
        for key in removed:
            resource.configs.add(name=key, op=pb.DELETE)
        response: pb.AlterConfigsResponse = self._rpc(
            "AlterConfigs", request, lambda r: [x.error_code for x in r.results]
        )
        return response.results[0]

    def describe_broker_configs(self, broker: str) -> dict[str, ConfigEntry]:
        """A broker's configs (KIP-226): its dynamic ones (source 1), the cluster-wide
        dynamic defaults (2) and, asked of that broker itself, its static properties
        (4); `broker` "" is the cluster-wide default alone."""
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.BROKER, name=broker)

        def attempt(timeout_s: float) -> Any:
            if self._metadata.stale():
                self._metadata.refresh([])
            address = self._metadata.address(int(broker)) if broker.isdigit() else None
            stub = (
                self._metadata.connections.stub(address)
                if address is not None
                else self._metadata.any_stub()
            )
            return call(stub.DescribeConfigs, request, timeout_s)

        response: pb.DescribeConfigsResponse = self._retrying(attempt)
        result = response.results[0]
        if result.error_code:
            raise for_code(result.error_code, result.error_message)
        return config_entries(result)

    def alter_broker_configs(
        self,
        broker: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Dynamic broker configs (KIP-226) of one broker (its id) or of every broker
        (""), taking effect without a restart."""
        result = self._alter_configs(pb.BROKER, broker, set, delete, validate_only)
        if result.error_code:
            raise for_code(result.error_code, result.error_message)
