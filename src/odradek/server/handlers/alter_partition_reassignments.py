"""AlterPartitionReassignments handler: start, replace or cancel partition reassignments (KIP-455).

API: v0-v1.

Behaviour: served by the controller, as in Kafka (the admin client sends it to the controller the
Metadata response names): the request is decided by `Controller.alter_partition_reassignments` in
turn with the controller's other events (see controller/partition_reassignments.py) and answered
once each reassignment has started, not when it completes. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (an empty or duplicate list, a negative id, a replica added on a broker
that is not live), NO_REASSIGNMENT_IN_PROGRESS (a cancellation, null replicas, of a partition not
being reassigned), and from v1 INVALID_REPLICATION_FACTOR for a target changing the partition's
replication factor when allow_replication_factor_change is false (Kafka 4's flag, echoed in
the answer). A broker that is not the controller answers NOT_CONTROLLER at the top.

A single node serves it too (it is its own controller): a target of its own broker id changes
nothing, any other broker is not live (INVALID_REPLICA_ASSIGNMENT, as Kafka answers).

Authorization (Kafka's): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    require_cluster(ctx, AclOperation.ALTER)
    controller = ctx.broker.controller
    if controller is None:
        return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return await controller.alter_partition_reassignments(request)


def error_response(
    request: AlterPartitionReassignmentsRequest, version: int, code: int
) -> AlterPartitionReassignmentsResponse:
    """The error, and the same error for each asked partition, as Kafka answers a refused request
    (tests/differential)."""
    message = _MESSAGES.get(code)
    Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    Partition = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
    responses = [
        Topic(t.name, [Partition(p.partition_index, code, message) for p in t.partitions])
        for t in request.topics
    ]
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=message, responses=responses)


_MESSAGES = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}
