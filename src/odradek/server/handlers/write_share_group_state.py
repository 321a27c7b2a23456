"""WriteShareGroupState handler (KIP-932; inter-broker, from a share-partition leader to the share
coordinator).

API: v0-v1 (v1 adds delivery_complete_count, taken and not kept).

Behaviour: each partition's new state (start offset and the state batches that changed, with the
writer's state and leader epochs) is written to `__share_group_state` as a ShareUpdate (a
ShareSnapshot every share.coordinator.snapshot.update.records.per.snapshot updates) with acks=-1,
and answered once committed (coordinator/share_coordinator.py). Errors per partition:
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH (a writer
older than the one the state knows), the append's errors.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition.
"""

from __future__ import annotations

from odradek.coordinator.share_partition import StateBatch
from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 1

Response = WriteShareGroupStateResponse


async def handle(ctx: RequestContext, request: WriteShareGroupStateRequest) -> Response:
    require_cluster_action(ctx)
    coordinator = ctx.broker.share_coordinator
    results = []
    for topic in request.topics:
        answered = []
        for p in topic.partitions:
            key = StateKey(request.group_id, topic.topic_id, p.partition)
            batches = [
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in p.state_batches
            ]
            code = await coordinator.write_state(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)
            answered.append(Response.PartitionResult(p.partition, code))
        results.append(Response.WriteStateResult(topic.topic_id, answered))
    return Response(results)


def error_response(request: WriteShareGroupStateRequest, version: int, code: int) -> Response:
    return Response(
        [
            Response.WriteStateResult(
                t.topic_id, [Response.PartitionResult(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ]
    )
