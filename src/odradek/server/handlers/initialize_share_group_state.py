"""InitializeShareGroupState handler (KIP-932; inter-broker, to the share coordinator).

API: v0.

Behaviour: each partition's share-partition state (group, topic id, partition) is started afresh
at `start_offset` with `state_epoch` (no batches) as a ShareSnapshot in `__share_group_state`
(coordinator/share_coordinator.py), answered once committed. Errors per partition: NOT_COORDINATOR
(the key's `__share_group_state` partition is not led here), COORDINATOR_LOAD_IN_PROGRESS,
FENCED_STATE_EPOCH (older than the stored state epoch), the append's errors.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition.
"""

from __future__ import annotations

from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0

Response = InitializeShareGroupStateResponse


async def handle(ctx: RequestContext, request: InitializeShareGroupStateRequest) -> Response:
    require_cluster_action(ctx)
    coordinator = ctx.broker.share_coordinator
    results = []
    for topic in request.topics:
        answered = []
        for p in topic.partitions:
            key = StateKey(request.group_id, topic.topic_id, p.partition)
            code = await coordinator.initialize_state(key, p.state_epoch, p.start_offset)
            answered.append(Response.PartitionResult(p.partition, code))
        results.append(Response.InitializeStateResult(topic.topic_id, answered))
    return Response(results)


def error_response(request: InitializeShareGroupStateRequest, version: int, code: int) -> Response:
    return Response(
        [
            Response.InitializeStateResult(
                t.topic_id, [Response.PartitionResult(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ]
    )
