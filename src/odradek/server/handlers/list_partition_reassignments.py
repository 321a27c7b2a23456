"""ListPartitionReassignments handler: the partition reassignments in progress (KIP-455).

API: v0.

Behaviour: served by the controller, as in Kafka, from its store (`Controller.
list_partition_reassignments`): every partition being reassigned, or those of the partitions asked
for that are (others, unknown ones included, are left out, as Kafka's ZooKeeper-mode controller
does), each with its full replicas, the replicas being added and those being removed. A broker that
is not the controller answers NOT_CONTROLLER. A single node, its own controller, answers with an
empty list: nothing can move there.

Authorization (Kafka's): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.context import RequestContext

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    require_cluster(ctx, AclOperation.DESCRIBE)
    controller = ctx.broker.controller
    if controller is None:
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return controller.list_partition_reassignments(request)


def error_response(
    request: ListPartitionReassignmentsRequest, version: int, code: int
) -> ListPartitionReassignmentsResponse:
    """The error, with each asked partition listed without replicas, as Kafka answers a refused
    request (tests/differential)."""
    Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    topics = [Topic(t.name, [Partition(i) for i in t.partition_indexes]) for t in request.topics or ()]
    message = "Cluster authorization failed." if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else None
    return ListPartitionReassignmentsResponse(error_code=code, error_message=message, topics=topics)
