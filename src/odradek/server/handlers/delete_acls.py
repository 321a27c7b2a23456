"""DeleteAcls handler.

API: v0-v3.

Behaviour, as Kafka's: the principal needs ALTER on the cluster (else every filter answers
CLUSTER_AUTHORIZATION_FAILED); without an ACL authorizer every filter answers SECURITY_DISABLED. Each
filter (as DescribeAcls's: handlers/describe_acls.py `acl_filter`; a filter holding UNKNOWN answers
INVALID_REQUEST) is answered with the stored bindings it matched, which are all removed together
(security/acl_store.py), so every broker applies the removal at once.
"""

from __future__ import annotations

import logging

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from odradek.security.acls import AclBinding, PatternType
from odradek.security.authorizer import AclOperation
from odradek.server.authz import SECURITY_DISABLED_MESSAGE, require_acl_store
from odradek.server.context import RequestContext
from odradek.server.handlers.describe_acls import acl_filter

API_KEY = ApiKey.DELETE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    store = require_acl_store(ctx, AclOperation.ALTER)
    stored = store.bindings()
    results: list[FilterResult] = []
    removed: set[AclBinding] = set()
    for f in request.filters:
        try:
            wanted = acl_filter(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter if ctx.api_version >= 1 else PatternType.LITERAL,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
        except KafkaError as exc:
            results.append(FilterResult(error_code=exc.code, error_message=exc.message))
            continue
        matched = sorted((b for b in stored if wanted.matches(b)), key=str)
        removed.update(matched)
        results.append(FilterResult(matching_acls=[_matching(b) for b in matched]))
    if removed:
        try:
            await store.remove(removed)
        except KafkaError as exc:
            log.warning("DeleteAcls from %s failed to remove ACLs: %s", ctx.principal, exc)
            return error_response(request, ctx.api_version, exc.code, exc.message)
        for binding in removed:
            log.info("ACL removed by %s: %s %s", ctx.principal, binding.pattern, binding.entry)
    return DeleteAclsResponse(filter_results=results)


def _matching(binding: AclBinding) -> Matching:
    return Matching(
        resource_type=binding.pattern.resource_type,
        resource_name=binding.pattern.name,
        pattern_type=binding.pattern.pattern_type,
        principal=binding.entry.principal,
        host=binding.entry.host,
        operation=binding.entry.operation,
        permission_type=binding.entry.permission_type,
    )


def error_response(
    request: DeleteAclsRequest, version: int, code: int, message: str | None = None
) -> DeleteAclsResponse:
    if code == ErrorCode.SECURITY_DISABLED:
        message = SECURITY_DISABLED_MESSAGE
    return DeleteAclsResponse(
        filter_results=[FilterResult(error_code=code, error_message=message) for _ in request.filters]
    )
