"""ReadShareGroupState handler (KIP-932; inter-broker, from a share-partition leader taking the
partition's leadership to the share coordinator).

API: v0.

Behaviour: each partition's share-partition state as `__share_group_state` holds it: state epoch,
start offset and state batches. Errors per partition: INVALID_REQUEST for a share-partition
without state ("Read operation on uninitialized share partition not allowed.", as Kafka 4.4 answers;
the leader then starts it itself, see server/share_partitions.py), NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition.
"""

from __future__ import annotations

from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.read_share_group_state import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0

Response = ReadShareGroupStateResponse
UNINITIALIZED = "Read operation on uninitialized share partition not allowed."


async def handle(ctx: RequestContext, request: ReadShareGroupStateRequest) -> Response:
    require_cluster_action(ctx)
    coordinator = ctx.broker.share_coordinator
    results = []
    for topic in request.topics:
        answered = []
        for p in topic.partitions:
            code, state = await coordinator.read_state(
                StateKey(request.group_id, topic.topic_id, p.partition)
            )
            result = Response.PartitionResult(p.partition, code)
            if code == ErrorCode.NONE and state is None:
                result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, UNINITIALIZED
            elif state is not None:
                result.state_epoch, result.start_offset = state.state_epoch, state.start_offset
                result.state_batches = [
                    Response.StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in state.batches
                ]
            answered.append(result)
        results.append(Response.ReadStateResult(topic.topic_id, answered))
    return Response(results)


def error_response(request: ReadShareGroupStateRequest, version: int, code: int) -> Response:
    return Response(
        [
            Response.ReadStateResult(
                t.topic_id, [Response.PartitionResult(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ]
    )
