"""The gRPC side of users' SCRAM credentials and ACLs: `Security` on a broker's gRPC
listener (seglog's tools; answered by the node's SecurityAdmin) and
`SecurityControl` on the controller listener (brokers commit the records)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_records import MetadataRecordError, decode_record
from seglog.node.client_quota_answers import alter_entries, describe_entries
from seglog.node.grpc_errors import code, refused
from seglog.node.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from seglog.node.security.grpc_auth import grpc_principal, peer_host
from seglog.proto import security_pb2 as spb
from seglog.proto import security_pb2_grpc

if TYPE_CHECKING:
    from seglog.node.controller.quorum_controller import QuorumController
    from seglog.node.security.grpc_sasl import GrpcSasl
    from seglog.node.security.security_admin import SecurityAdmin


class SecurityControlServicer(security_pb2_grpc.SecurityControlServicer):
    def __init__(self, quorum: QuorumController) -> None:
        self.quorum = quorum

    def CommitSecurityRecords(
        self, request: spb.SecurityRecords, context: grpc.ServicerContext
    ) -> spb.SecurityRecordResults:
        try:
            records = [decode_record(r) for r in request.records]
        except MetadataRecordError as e:
            return spb.SecurityRecordResults(
                results=[spb.AclResult(error_code=code("INVALID_REQUEST"), error_message=str(e))]
            )
        try:
            results = self.quorum.commit_security(records)
        except ControlError as e:
            return spb.SecurityRecordResults(results=[spb.AclResult(**refused(e))])
        return spb.SecurityRecordResults(
            results=[spb.AclResult(error_code=code(e), error_message=m) for e, m in results]
        )


def binding_to_proto(b: AclBinding) -> spb.AclBinding:
    return spb.AclBinding(**b.wire_fields())


def binding_from_proto(p: spb.AclBinding) -> AclBinding:
    return AclBinding(
        ResourceType(p.resource_type),
        p.resource_name,
        PatternType(p.pattern_type),
        p.principal,
        p.host,
        AclOperation(p.operation),
        PermissionType(p.permission_type),
    )


def filter_from_proto(p: spb.AclFilter) -> AclFilter:
    return AclFilter(
        ResourceType(p.resource_type or ResourceType.ANY),
        p.resource_name if p.HasField("resource_name") else None,
        PatternType(p.pattern_type or PatternType.ANY),
        p.principal if p.HasField("principal") else None,
        p.host if p.HasField("host") else None,
        AclOperation(p.operation or AclOperation.ANY),
        PermissionType(p.permission_type or PermissionType.ANY),
    )


def filter_to_proto(f: AclFilter) -> spb.AclFilter:
    p = spb.AclFilter(
        resource_type=int(f.resource_type),
        pattern_type=int(f.pattern_type),
        operation=int(f.operation),
        permission_type=int(f.permission),
    )
    if f.resource_name is not None:
        p.resource_name = f.resource_name
    if f.principal is not None:
        p.principal = f.principal
    if f.host is not None:
        p.host = f.host
    return p


class SecurityServicer(security_pb2_grpc.SecurityServicer):
    def __init__(self, admin: SecurityAdmin, sasl: GrpcSasl | None = None) -> None:
        self.admin = admin
        self.sasl = sasl  # None: no delegation.token.secret.key, no SASL on gRPC

    def SaslAuthenticate(
        self, request: spb.SaslAuthenticateRequest, context: grpc.ServicerContext
    ) -> spb.SaslAuthenticateResponse:
        if self.sasl is None:
            return spb.SaslAuthenticateResponse(
                error_code=code("ILLEGAL_SASL_STATE"),
                error_message="SASL on gRPC is off: the node has no delegation.token.secret.key",
            )
        answer = self.sasl.authenticate(
            request.mechanism,
            request.auth_bytes,
            request.session_id,
            peer_host(context.peer()),
        )
        error = answer.pop("error")
        return spb.SaslAuthenticateResponse(error_code=code(error), **answer)

    def _who(self, context: grpc.ServicerContext) -> tuple[str, str]:
        return grpc_principal(context)

    def AlterUserScramCredentials(
        self, request: spb.AlterUserScramCredentialsRequest, context: grpc.ServicerContext
    ) -> spb.AlterUserScramCredentialsResponse:
        principal, host = self._who(context)
        results = self.admin.alter_scram(
            principal,
            host,
            [(d.name, d.mechanism) for d in request.deletions],
            [
                (u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                for u in request.upsertions
            ],
        )
        return spb.AlterUserScramCredentialsResponse(
            results=[
                spb.UserResult(user=u, error_code=code(e), error_message=m) for u, e, m in results
            ]
        )

    def DescribeUserScramCredentials(
        self, request: spb.DescribeUserScramCredentialsRequest, context: grpc.ServicerContext
    ) -> spb.DescribeUserScramCredentialsResponse:
        principal, host = self._who(context)
        out = spb.DescribeUserScramCredentialsResponse()
        for user, error, message, creds in self.admin.describe_scram(
            principal, host, list(request.users) or None
        ):
            out.results.append(
                spb.DescribedUser(
                    user=user,
                    error_code=code(error),
                    error_message=message,
                    credentials=[spb.CredentialInfo(mechanism=m, iterations=i) for m, i in creds],
                )
            )
        return out

    def CreateAcls(
        self, request: spb.CreateAclsRequest, context: grpc.ServicerContext
    ) -> spb.CreateAclsResponse:
        principal, host = self._who(context)
        bindings = []
        for c in request.creations:
            try:
                bindings.append(binding_from_proto(c))
            except ValueError as e:
                return spb.CreateAclsResponse(
                    results=[
                        spb.AclResult(error_code=code("INVALID_REQUEST"), error_message=str(e))
                    ]
                    * len(request.creations)
                )
        results = self.admin.create_acls(principal, host, bindings)
        return spb.CreateAclsResponse(
            results=[spb.AclResult(error_code=code(e), error_message=m) for e, m in results]
        )

    def DescribeAcls(
        self, request: spb.AclFilter, context: grpc.ServicerContext
    ) -> spb.DescribeAclsResponse:
        principal, host = self._who(context)
        error, message, bindings = self.admin.describe_acls(
            principal, host, filter_from_proto(request)
        )
        return spb.DescribeAclsResponse(
            error_code=code(error),
            error_message=message,
            bindings=[binding_to_proto(b) for b in bindings],
        )

    def DescribeClientQuotas(
        self, request: spb.DescribeClientQuotasRequest, context: grpc.ServicerContext
    ) -> spb.DescribeClientQuotasResponse:
        principal, host = self._who(context)
        if not self.admin.may(principal, host, AclOperation.DESCRIBE_CONFIGS):
            return spb.DescribeClientQuotasResponse(
                error_code=code("CLUSTER_AUTHORIZATION_FAILED"),
                error_message="not authorized to DESCRIBE_CONFIGS on the cluster",
            )
        (error, message), found = describe_entries(
            self.admin,
            [
                (c.entity_type, c.match_type, c.match if c.HasField("match") else None)
                for c in request.components
            ],
            request.strict,
        )
        return spb.DescribeClientQuotasResponse(
            error_code=code(error),
            error_message=message,
            entries=[
                spb.QuotaEntry(
                    entity=[_entity_part(t, n) for t, n in entity],
                    values=[spb.QuotaValue(key=k, value=v) for k, v in sorted(values.items())],
                )
                for entity, values in found
            ],
        )

    def AlterClientQuotas(
        self, request: spb.AlterClientQuotasRequest, context: grpc.ServicerContext
    ) -> spb.AlterClientQuotasResponse:
        principal, host = self._who(context)
        errors = alter_entries(
            self.admin,
            [
                (
                    [
                        (p.entity_type, p.entity_name if p.HasField("entity_name") else None)
                        for p in e.entity
                    ],
                    [(o.key, o.value, o.remove) for o in e.ops],
                )
                for e in request.entries
            ],
            request.validate_only,
            self.admin.may(principal, host, AclOperation.ALTER_CONFIGS),
        )
        return spb.AlterClientQuotasResponse(
            results=[spb.QuotaResult(error_code=code(e), error_message=m) for e, m in errors]
        )

    def DeleteAcls(
        self, request: spb.DeleteAclsRequest, context: grpc.ServicerContext
    ) -> spb.DeleteAclsResponse:
        principal, host = self._who(context)
        results = self.admin.delete_acls(
            principal, host, [filter_from_proto(f) for f in request.filters]
        )
        return spb.DeleteAclsResponse(
            results=[
                spb.FilterResult(
                    error_code=code(e),
                    error_message=m,
                    matching=[binding_to_proto(b) for b in matched],
                )
                for e, m, matched in results
            ]
        )


def _entity_part(entity_type: str, name: str | None) -> spb.QuotaEntityPart:
    part = spb.QuotaEntityPart(entity_type=entity_type)
    if name is not None:
        part.entity_name = name
    return part
