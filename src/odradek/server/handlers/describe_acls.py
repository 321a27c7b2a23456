"""DescribeAcls handler.

API: v0-v3.

Behaviour, as Kafka's: the principal needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED);
without an ACL authorizer the answer is SECURITY_DISABLED. The filter (`AclBindingFilter`: resource
type, name, pattern type ANY / MATCH / LITERAL / PREFIXED (v0: LITERAL), principal, host, operation,
permission; a null part or ANY matches anything) selects the stored bindings, answered grouped by
resource pattern. A filter holding an UNKNOWN value answers INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from odradek.security.acl_store import by_pattern
from odradek.security.acls import AclBindingFilter, AclPermissionType, PatternType
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import SECURITY_DISABLED_MESSAGE, require_acl_store
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    store = require_acl_store(ctx, AclOperation.DESCRIBE)
    wanted = acl_filter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter if ctx.api_version >= 1 else PatternType.LITERAL,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    matching = by_pattern(b for b in store.bindings() if wanted.matches(b))
    resources = [
        Resource(
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=[
                Description(
                    principal=e.principal,
                    host=e.host,
                    operation=e.operation,
                    permission_type=e.permission_type,
                )
                for e in sorted(entries, key=str)
            ],
        )
        for pattern, entries in sorted(matching.items(), key=lambda i: (i[0].resource_type, i[0].name))
    ]
    return DescribeAclsResponse(resources=resources)


def acl_filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    """The request's filter; INVALID_REQUEST for a value out of Kafka's enums or UNKNOWN."""
    try:
        found = AclBindingFilter(
            ResourceType(resource_type),
            name,
            PatternType(pattern_type),
            principal,
            host,
            AclOperation(operation),
            AclPermissionType(permission_type),
        )
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    unknown = found.unknown_part()
    if unknown is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"The filter's {unknown} is UNKNOWN")
    return found


def error_response(request: DescribeAclsRequest, version: int, code: int) -> DescribeAclsResponse:
    message = SECURITY_DISABLED_MESSAGE if code == ErrorCode.SECURITY_DISABLED else None
    return DescribeAclsResponse(error_code=code, error_message=message)
