"""UpdateMetadata handler: the controller tells this broker the cluster's brokers and partitions.

API: v5-v8 (the topic-grouped request forms). v0-v4 (ungrouped partition states, sent only by
controllers older than Kafka 2.2) are answered UNSUPPORTED_VERSION by the dispatcher and not
advertised.

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single-node broker is its own
controller and closes the connection of an UpdateMetadata from the wire, as a Kafka broker does for
an API its mode does not enable). The request goes to the broker's control plane
(server/control_plane.py), which checks it: a controller epoch newer than the newest seen is
accepted only when ZooKeeper's /controller and /controller_epoch name the request's controller id
and epoch (else STALE_CONTROLLER_EPOCH, the epoch seen unchanged, or the connection closed when
ZooKeeper cannot be read; every refusal logs a WARNING with the peer address, listener and
principal); a controller epoch older than the newest this broker has seen (from any of the three
controller requests) is refused with STALE_CONTROLLER_EPOCH, a broker epoch older than this broker's
registration (neither being -1) with STALE_BROKER_EPOCH, and either way the metadata cache is
unchanged; otherwise the cache takes the request.

Deliberate deviations: a newer controller epoch is checked against ZooKeeper (Kafka takes it as it
comes); before v7 the request carries no topic ids, so the cache records the zero id for topics it
learns from a v5-v6 request; `type` and `isKRaftController` (v8) are ignored (no KRaft migration).

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED and a
WARNING naming the peer and the principal (server/authz.py).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext
from odradek.server.control_plane import controller_peer, update_metadata_refusal

API_KEY = ApiKey.UPDATE_METADATA
MIN_VERSION = 5
MAX_VERSION = 8
ZK_BROKER_ONLY = True


async def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    require_cluster_action(ctx)
    return await ctx.broker.control_plane.update_metadata_from(controller_peer(ctx), request)


def error_response(request: UpdateMetadataRequest, version: int, code: int) -> UpdateMetadataResponse:
    return update_metadata_refusal(request, code)
