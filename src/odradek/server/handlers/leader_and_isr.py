"""LeaderAndIsr handler: the controller tells this broker which partitions it leads and follows.

API: v2-v7 (the topic-grouped request forms). v0-v1 (ungrouped partition states, sent only by
controllers older than Kafka 2.2) are answered UNSUPPORTED_VERSION by the dispatcher and not
advertised.

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single-node broker is its own
controller and closes the connection of a LeaderAndIsr from the wire, as a Kafka broker does for an
API its mode does not enable). The request goes to the broker's control plane
(server/control_plane.py), which checks it: a controller epoch newer than the newest seen is
accepted only when ZooKeeper's /controller and /controller_epoch name the request's controller id
and epoch (else STALE_CONTROLLER_EPOCH, the epoch seen unchanged, or the connection closed when
ZooKeeper cannot be read; every refusal logs a WARNING with the peer address, listener and
principal); a controller epoch older than the newest this broker has seen is refused whole with
STALE_CONTROLLER_EPOCH, a broker epoch older than this broker's registration (neither being -1) with
STALE_BROKER_EPOCH; partition states are then checked one by one (replication/fencing.py). Responses
before v5 carry the partition errors flat, with topic names.

Deliberate deviations: a newer controller epoch is checked against ZooKeeper (Kafka takes it as it
comes).

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED and a
WARNING naming the peer and the principal (server/authz.py).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext
from odradek.server.control_plane import controller_peer, leader_and_isr_refusal

API_KEY = ApiKey.LEADER_AND_ISR
MIN_VERSION = 2
MAX_VERSION = 7
ZK_BROKER_ONLY = True
_FIRST_TOPIC_GROUPED_RESPONSE = 5


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    require_cluster_action(ctx)
    return for_version(
        await ctx.broker.control_plane.leader_and_isr_from(controller_peer(ctx), request), ctx.api_version
    )


def for_version(response: LeaderAndIsrResponse, version: int) -> LeaderAndIsrResponse:
    """The broker's topic-grouped response in the shape of `version` (flat before v5)."""
    if version >= _FIRST_TOPIC_GROUPED_RESPONSE:
        return response
    return LeaderAndIsrResponse(
        error_code=response.error_code,
        partition_errors=[e for topic in response.topics for e in topic.partition_errors],
    )


def error_response(request: LeaderAndIsrRequest, version: int, code: int) -> LeaderAndIsrResponse:
    return for_version(leader_and_isr_refusal(request, code), version)
