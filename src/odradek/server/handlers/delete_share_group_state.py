"""DeleteShareGroupState handler (KIP-932; inter-broker, to the share coordinator).

API: v0.

Behaviour: each partition's share-partition state is deleted from `__share_group_state` (tombstones
of its ShareSnapshot and ShareUpdate keys; nothing to delete is success), answered once committed.
Errors per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, the append's errors.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition.
"""

from __future__ import annotations

from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0

Response = DeleteShareGroupStateResponse


async def handle(ctx: RequestContext, request: DeleteShareGroupStateRequest) -> Response:
    require_cluster_action(ctx)
    coordinator = ctx.broker.share_coordinator
    results = []
    for topic in request.topics:
        answered = []
        for p in topic.partitions:
            code = await coordinator.delete_state(StateKey(request.group_id, topic.topic_id, p.partition))
            answered.append(Response.PartitionResult(p.partition, code))
        results.append(Response.DeleteStateResult(topic.topic_id, answered))
    return Response(results)


def error_response(request: DeleteShareGroupStateRequest, version: int, code: int) -> Response:
    return Response(
        [
            Response.DeleteStateResult(
                t.topic_id, [Response.PartitionResult(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ]
    )
