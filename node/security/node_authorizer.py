"""A node's authorizer: `authorizer.class.name` set (Kafka's StandardAuthorizer name,
or any other: seglog has one authorizer) turns it on, with `super.users` and
`allow.everyone.if.no.acl.found`; the bindings are the ACL entries of the node's
metadata image. Off (the default), every request is allowed and the ACL APIs answer
SECURITY_DISABLED, as Kafka does."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import AccessControlEntryRecord

from ..event_log import EventLogger
from .acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from .authorizer import AuthorizerSettings, allowed_on_any, authorize

_log = EventLogger("security")


def binding_of(r: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        PermissionType(r.permission_type),
    )


class NodeAuthorizer:
    def __init__(self, settings: AuthorizerSettings, image: Callable[[], MetadataImage]) -> None:
        self.settings = settings
        self._image = image
        self._cache: dict[str, AclBinding] = {}

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], image: Callable[[], MetadataImage]
    ) -> NodeAuthorizer | None:
        name = (props.get("authorizer.class.name") or "").strip()
        settings = AuthorizerSettings.from_properties(props)
        if not name:
            return None
        return cls(settings, image)

    def bindings(self) -> list[AclBinding]:
        entries = dict(self._image().acls)  # a copy: the metadata thread applies records
        if entries.keys() != self._cache.keys():
            self._cache = {i: self._cache.get(i) or binding_of(r) for i, r in entries.items()}
        return list(self._cache.values())

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        ok = authorize(
            self.settings, self.bindings(), principal, host, operation, resource_type, name
        )
        if not ok:
            _log.info(
                "authorization_denied",
                principal=principal,
                address=host,
                operation=operation.name,
                resource_type=resource_type.name,
                resource=name,
            )
        return ok

    def allowed_on_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return allowed_on_any(
            self.settings, self.bindings(), principal, host, operation, resource_type
        )
