"""CreateAcls handler.

API: v0-v3.

Behaviour, as Kafka's: the principal needs ALTER on the cluster (else every creation answers
CLUSTER_AUTHORIZATION_FAILED); without an ACL authorizer every creation answers SECURITY_DISABLED.
Each creation is checked on its own (`validate_binding`: a known resource type, LITERAL or PREFIXED
(v0 has no pattern type: LITERAL), a non-empty name, `kafka-cluster` for the cluster, a known
operation and permission, a `Type:name` principal) and answers INVALID_REQUEST with a message when
refused; the valid ones are stored together (security/acl_store.py), so every broker applies them at
once. A store that cannot write answers its error for the creations it held.
"""

from __future__ import annotations

import logging

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    validate_binding,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import SECURITY_DISABLED_MESSAGE, require_acl_store
from odradek.server.context import RequestContext

API_KEY = ApiKey.CREATE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)

Result = CreateAclsResponse.AclCreationResult


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    store = require_acl_store(ctx, AclOperation.ALTER)
    results: list[Result] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        try:
            binding = _binding(creation, ctx.api_version)
            validate_binding(binding)
        except KafkaError as exc:
            results.append(Result(error_code=exc.code, error_message=exc.message))
            continue
        valid.append(binding)
        results.append(Result())
    if valid:
        try:
            await store.add(valid)
        except KafkaError as exc:
            log.warning("CreateAcls from %s failed to store its ACLs: %s", ctx.principal, exc)
            return error_response(request, ctx.api_version, exc.code, exc.message)
        for binding in valid:
            log.info("ACL added by %s: %s %s", ctx.principal, binding.pattern, binding.entry)
    return CreateAclsResponse(results=results)


def _binding(creation: CreateAclsRequest.AclCreation, version: int) -> AclBinding:
    try:
        pattern = ResourcePattern(
            ResourceType(creation.resource_type),
            creation.resource_name,
            PatternType(creation.resource_pattern_type) if version >= 1 else PatternType.LITERAL,
        )
        entry = AccessControlEntry(
            creation.principal,
            creation.host,
            AclOperation(creation.operation),
            AclPermissionType(creation.permission_type),
        )
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return AclBinding(pattern, entry)


def error_response(
    request: CreateAclsRequest, version: int, code: int, message: str | None = None
) -> CreateAclsResponse:
    if code == ErrorCode.SECURITY_DISABLED:
        message = SECURITY_DISABLED_MESSAGE
    return CreateAclsResponse(
        results=[Result(error_code=code, error_message=message) for _ in request.creations]
    )
