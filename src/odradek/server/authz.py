"""The handlers' authorization checks, as Kafka's KafkaApis / AuthHelper make them.

Owns the helpers every handler uses to ask the broker's `Authorizer` (security/authorizer.py) about
the resources of its request:
- `authorize(ctx, operation, resource_type, name)` and `authorize_cluster(ctx, operation)`;
- `require_cluster(ctx, operation)`: raises KafkaError(CLUSTER_AUTHORIZATION_FAILED), which the
  dispatcher answers with the API's error response (Kafka's whole-request refusal);
- `require_group(ctx, operation, group_id)` and `require_transactional_id(...)`: the same with
  GROUP_AUTHORIZATION_FAILED and TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
- `require_cluster_action(ctx)`: the same for the inter-broker APIs (LeaderAndIsr, UpdateMetadata,
  StopReplica, ControlledShutdown, AlterPartition, WriteTxnMarkers, a replica's Fetch), with a
  WARNING naming the API, the peer and the principal;
- `authorized_names(ctx, operation, resource_type, names)`: the subset of names allowed (Kafka's
  filterByAuthorized), asked once per distinct name; `split_by_authorized` splits request entries
  by it (Kafka's partitionSeqByAuthorized), and `refusing_topics` answers a request's refused topics
  with TOPIC_AUTHORIZATION_FAILED through the handler's error response, handling the rest;
- `authorized_operations(ctx, resource_type, name)`: the bit field of the operations allowed on a
  resource, for the `*_authorized_operations` fields (Metadata, DescribeCluster, DescribeGroups,
  DescribeTopicPartitions), over Kafka's supported operations of each resource type;
- `require_acl_store(ctx, operation)`: the ACL store of the ACL APIs (SECURITY_DISABLED without an
  ACL authorizer), once the principal may perform `operation` on the cluster.

Callers: the handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.acl_store import AclStore
from odradek.security.acls import SUPPORTED_OPERATIONS
from odradek.security.authorizer import CLUSTER, AclOperation, Resource, ResourceType
from odradek.server.context import RequestContext

log = logging.getLogger(__name__)

T = TypeVar("T")


class TopicsRequest(Protocol):
    topics: list[Any]


R = TypeVar("R", bound=TopicsRequest)


def authorize(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    log_if_denied: bool = True,
) -> bool:
    return ctx.broker.authorizer.authorize(ctx, operation, Resource(resource_type, name), log_if_denied)


def authorize_cluster(ctx: RequestContext, operation: AclOperation, log_if_denied: bool = True) -> bool:
    return ctx.broker.authorizer.authorize(ctx, operation, CLUSTER, log_if_denied)


def require_cluster(ctx: RequestContext, operation: AclOperation) -> None:
    if not authorize_cluster(ctx, operation):
        raise KafkaError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"Request {_api(ctx)} needs {operation.name} on the cluster, which {ctx.principal} may not",
        )


def require_cluster_action(ctx: RequestContext) -> None:
    """CLUSTER_ACTION on the cluster, for an inter-broker request; a refusal is a WARNING."""
    if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return
    log.warning(
        "Refused inter-broker request %s from %s on listener %s: principal %s lacks CLUSTER_ACTION",
        _api(ctx),
        ctx.client_host,
        ctx.listener,
        ctx.principal,
    )
    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{ctx.principal} may not use {_api(ctx)}")


def authorized_names(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    log_if_denied: bool = True,
) -> set[str]:
    return {n for n in set(names) if authorize(ctx, operation, resource_type, n, log_if_denied)}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The bit field (1 << AclOperation) of the supported operations allowed on the resource."""
    resource = Resource(resource_type, name)
    authorizer = ctx.broker.authorizer
    allowed = (
        op for op in SUPPORTED_OPERATIONS[resource_type] if authorizer.authorize(ctx, op, resource, False)
    )
    return sum(1 << op for op in allowed)


def _api(ctx: RequestContext) -> str:
    try:
        return ApiKey(ctx.header.api_key).name
    except ValueError:
        return str(ctx.header.api_key)


SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def require_acl_store(ctx: RequestContext, operation: AclOperation) -> AclStore:
    """The ACL store of the broker's AclAuthorizer, for an ACL API that needs `operation` on the
    cluster: SECURITY_DISABLED without an authorizer (as Kafka's ACL APIs answer), else
    CLUSTER_AUTHORIZATION_FAILED when the principal may not."""
    authorizer = ctx.broker.authorizer
    if not isinstance(authorizer, AclAuthorizer):
        raise KafkaError(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    require_cluster(ctx, operation)
    return authorizer.store


def split_by_authorized(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    items: Iterable[T],
    name: Callable[[T], str],
) -> tuple[list[T], list[T]]:
    """`items` split into those whose resource (named by `name(item)`) allows `operation` and the
    rest (Kafka's partitionSeqByAuthorized)."""
    listed = list(items)
    allowed = authorized_names(ctx, operation, resource_type, (name(i) for i in listed))
    return [i for i in listed if name(i) in allowed], [i for i in listed if name(i) not in allowed]


async def refusing_topics(
    ctx: RequestContext,
    request: R,
    operation: AclOperation,
    handle: Callable[[RequestContext, R], Awaitable[Any]],
    error_response: Callable[[R, int, int], Any],
    name: Callable[[Any], str] = lambda topic: topic.name,
) -> Any:
    """`handle` the request's topics that allow `operation`; the others are answered as
    `error_response` answers them, with TOPIC_AUTHORIZATION_FAILED, after the handled ones."""
    allowed, refused = split_by_authorized(ctx, operation, ResourceType.TOPIC, request.topics, name)
    if not refused:
        return await handle(ctx, request)
    response = await handle(ctx, replace(request, topics=allowed))  # type: ignore[type-var]
    refusal = error_response(
        replace(request, topics=refused), ctx.api_version, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )  # type: ignore[type-var]
    response.topics.extend(refusal.topics)
    return response


def require_group(ctx: RequestContext, operation: AclOperation, group_id: str) -> None:
    if not authorize(ctx, operation, ResourceType.GROUP, group_id):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def require_transactional_id(ctx: RequestContext, operation: AclOperation, transactional_id: str) -> None:
    if not authorize(ctx, operation, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


# The authorization refusals, each its own error code
AUTHORIZATION_FAILURES = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)

# ConfigResource types (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_GROUP = 2, 4, 8, 32


def require_config_resource(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource: a topic's on the topic (else
    TOPIC_AUTHORIZATION_FAILED), a broker's or broker logger's on the cluster (else
    CLUSTER_AUTHORIZATION_FAILED)."""
    if resource_type == CONFIG_TOPIC and not authorize(ctx, operation, ResourceType.TOPIC, name):
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    if resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER) and not authorize_cluster(ctx, operation):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
    if resource_type == CONFIG_GROUP and not authorize(ctx, operation, ResourceType.GROUP, name):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
