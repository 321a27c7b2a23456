"""DescribeCluster handler.

API: v0-v2.

Behaviour: cluster id, controller id and the live brokers with their endpoints advertised on the
listener the request arrived on. Only the brokers endpoint type (1) is served; asking for
controllers (2) answers UNSUPPORTED_ENDPOINT_TYPE, as a broker does. Cluster authorized operations
are reported when asked for (those the principal is allowed; no authorizer: all). v2's
include_fenced_brokers adds nothing and is_fenced is always false: a fenced broker is a KRaft
state, and the brokers odradek lists are the live ones (registered in ZooKeeper, or the single
node). As in Kafka 3.9, no other authorization.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from odradek.security.authorizer import CLUSTER_NAME, ResourceType
from odradek.server.authz import authorized_operations
from odradek.server.context import RequestContext
from odradek.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED

API_KEY = ApiKey.DESCRIBE_CLUSTER
MIN_VERSION = 0
MAX_VERSION = 2

BROKERS_ENDPOINT_TYPE = 1


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    if ctx.api_version >= 1 and request.endpoint_type != BROKERS_ENDPOINT_TYPE:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="The broker only handles the BROKER endpoint type",
            endpoint_type=request.endpoint_type,
        )
    metadata = ctx.broker.metadata_cache
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    return DescribeClusterResponse(
        cluster_id=ctx.broker.cluster_id,
        controller_id=metadata.controller_id(),
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack
            )
            for b in metadata.brokers()
            if (endpoint := b.endpoint(ctx.listener)) is not None
        ],
        cluster_authorized_operations=operations,
    )


def error_response(request: DescribeClusterRequest, version: int, code: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=code)
