"""AlterPartition handler: a partition's leader asks the controller to change its ISR.

API: v0-v3 (v0-v1 name topics, v2+ by topic id; v3 names the new ISR with broker epochs, whose ids
are taken).

Behaviour: served only in ZooKeeper mode (`ZK_BROKER_ONLY`: a single node leads every partition
alone and never shrinks or grows an ISR). On the controller the request is decided by
`Controller.alter_partition` in turn with the controller's other events (see controller/isr_changes.py); a
broker that is not the controller answers NOT_CONTROLLER at the top, and the leader's channel
(server/to_controller.py) finds the controller again and resends. Per partition: the new leader
epoch, ISR and partition epoch, or FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA,
UNKNOWN_TOPIC_OR_PARTITION; a request from a broker that is not live or with a stale broker epoch:
STALE_BROKER_EPOCH at the top.

Deliberate deviations: leader_recovery_state (KIP-704) is always 0 (RECOVERED): an unclean leader
does not go through a recovering state.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED and a
WARNING naming the peer and the principal (server/authz.py).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_PARTITION
MIN_VERSION = 0
MAX_VERSION = 3
ZK_BROKER_ONLY = True


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    require_cluster_action(ctx)
    controller = ctx.broker.controller
    if controller is None:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return await controller.alter_partition(request)


def error_response(request: AlterPartitionRequest, version: int, code: int) -> AlterPartitionResponse:
    return AlterPartitionResponse(error_code=code)
