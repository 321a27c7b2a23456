"""ReadShareGroupStateSummary handler (KIP-932; inter-broker, from the group coordinator to the
share coordinator: DescribeShareGroupOffsets).

API: v0.

Behaviour: each partition's state epoch and start offset as `__share_group_state` holds them; a
share-partition without state answers start offset -1. Errors per partition: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition.
"""

from __future__ import annotations

from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
MIN_VERSION = 0
MAX_VERSION = 0

Response = ReadShareGroupStateSummaryResponse


async def handle(ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> Response:
    require_cluster_action(ctx)
    coordinator = ctx.broker.share_coordinator
    results = []
    for topic in request.topics:
        answered = []
        for p in topic.partitions:
            code, state = await coordinator.read_state(
                StateKey(request.group_id, topic.topic_id, p.partition)
            )
            result = Response.PartitionResult(p.partition, code, start_offset=-1)
            if state is not None:
                result.state_epoch, result.start_offset = state.state_epoch, state.start_offset
            answered.append(result)
        results.append(Response.ReadStateSummaryResult(topic.topic_id, answered))
    return Response(results)


def error_response(request: ReadShareGroupStateSummaryRequest, version: int, code: int) -> Response:
    return Response(
        [
            Response.ReadStateSummaryResult(
                t.topic_id, [Response.PartitionResult(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ]
    )
