"""ControlledShutdown handler: a broker about to stop asks the controller to move its partitions.

API: v1-v3 (v2+ carry the broker epoch; v1 is not checked against it). The brokers of this
project send v3.

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single node has nowhere to move its
partitions). On the controller the request is decided by `Controller.controlled_shutdown` in turn
with the controller's other events (see controller/controlled_shutdown.py): leadership of the
broker's partitions moves to other live ISR members, the broker leaves the ISRs it follows, and the
answer names the partitions it still leads (remaining_partitions). A broker that is not the controller answers
NOT_CONTROLLER, and the asking broker's channel (server/to_controller.py) finds the controller
again and resends; a broker that is not live: BROKER_NOT_AVAILABLE; a stale broker epoch:
STALE_BROKER_EPOCH.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED and a
WARNING naming the peer and the principal (server/authz.py).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
MIN_VERSION = 1
MAX_VERSION = 3
ZK_BROKER_ONLY = True


async def handle(ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    require_cluster_action(ctx)
    controller = ctx.broker.controller
    if controller is None:
        return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return await controller.controlled_shutdown(request)


def error_response(request: ControlledShutdownRequest, version: int, code: int) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(error_code=code)
