"""StopReplica handler: the controller tells this broker to stop (and maybe delete) replicas.

API: v3-v4 (per-partition leader epochs and delete flags). v0-v2 (one delete flag for the whole
request, no leader epochs, sent only by controllers older than Kafka 2.6) are answered
UNSUPPORTED_VERSION by the dispatcher and not advertised.

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single-node broker is its own
controller and closes the connection of a StopReplica from the wire, as a Kafka broker does for an
API its mode does not enable). The request goes to the broker's control plane
(server/control_plane.py), which checks it: a controller epoch newer than the newest seen is
accepted only when ZooKeeper's /controller and /controller_epoch name the request's controller id
and epoch (else STALE_CONTROLLER_EPOCH, the epoch seen unchanged, or the connection closed when
ZooKeeper cannot be read; every refusal logs a WARNING with the peer address, listener and
principal); a controller epoch older than the newest this broker has seen is refused whole with
STALE_CONTROLLER_EPOCH, a broker epoch older than this broker's registration (neither being -1) with
STALE_BROKER_EPOCH, every partition carrying the same error and no replica stopped; otherwise each
partition is fenced by its leader epoch (replication/fencing.py).

Deliberate deviations: `isKRaftController` (v4) is ignored (no KRaft migration); a newer controller
epoch is checked against ZooKeeper (Kafka takes it as it comes).

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED and a
WARNING naming the peer and the principal (server/authz.py).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext
from odradek.server.control_plane import controller_peer, stop_replica_refusal

API_KEY = ApiKey.STOP_REPLICA
MIN_VERSION = 3
MAX_VERSION = 4
ZK_BROKER_ONLY = True


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    require_cluster_action(ctx)
    return await ctx.broker.control_plane.stop_replica_from(controller_peer(ctx), request)


def error_response(request: StopReplicaRequest, version: int, code: int) -> StopReplicaResponse:
    return stop_replica_refusal(request, code)
