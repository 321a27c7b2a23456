"""StopReplica handler: the controller tells this broker to stop (and maybe delete) replicas.

API: v3-v4 (per-partition leader epochs and delete flags). v0-v2 (one delete flag for the whole
request, no leader epochs, sent only by controllers older than Kafka 2.6) are answered
UNSUPPORTED_VERSION by the dispatcher and not advertised.

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single-node broker is its own
controller and closes the connection of a StopReplica from the wire, as a Kafka broker does for an
API its mode does not enable). The request goes to `Broker.handle_stop_replica`, the same function
the in-process `LocalChannel` calls: a controller epoch older than the newest this broker has seen
is refused whole with STALE_CONTROLLER_EPOCH, a broker epoch older than this broker's registration
(neither being -1) with STALE_BROKER_EPOCH, every partition carrying the same error and no replica
stopped; otherwise each partition is fenced by its leader epoch (replication/fencing.py).

Deliberate deviations: `isKRaftController` (v4) is ignored (no KRaft migration).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.replication.replica_manager import stop_error
from odradek.server.context import RequestContext

API_KEY = ApiKey.STOP_REPLICA
MIN_VERSION = 3
MAX_VERSION = 4
ZK_BROKER_ONLY = True


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    return ctx.broker.handle_stop_replica(request)


def refusal(request: StopReplicaRequest, code: int) -> StopReplicaResponse:
    """The answer to a request refused whole: `code` at the top and for every partition."""
    return StopReplicaResponse(
        error_code=code,
        partition_errors=[
            stop_error(topic.topic_name, p, code)
            for topic in request.topic_states
            for p in topic.partition_states
        ],
    )


def error_response(request: StopReplicaRequest, version: int, code: int) -> StopReplicaResponse:
    return refusal(request, code)
