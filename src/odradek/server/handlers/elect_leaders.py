"""ElectLeaders handler: an admin asks the controller for preferred or unclean leader elections.

API: v0-v2 (v0 has no election_type and means PREFERRED; v1+ carry a top-level error_code; v2 is
the flexible encoding).

Behaviour (KIP-460, Kafka's ZooKeeper-mode broker): served by the controller, as Kafka's admin
client sends it there; the elections are decided by `Controller.elect_leaders` in turn with the
controller's other events (see controller/elections.py). In single-node mode the local controller
answers (each partition's one replica already leads: ELECTION_NOT_NEEDED for PREFERRED). Per
partition: NONE once the partition was elected and this broker's metadata cache names the new
leader (Kafka's DelayedElectLeader; REQUEST_TIMED_OUT past timeout_ms), else
ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION or INVALID_TOPIC_EXCEPTION with a message. A null topic list asks for
every partition, and then the partitions that needed no election are left out of the answer, as
Kafka does. An election_type other than 0 and 1: INVALID_REQUEST.

Deliberate deviations: a broker that is not the controller answers NOT_CONTROLLER at the top (v1+)
as well as per partition (Kafka sets it per partition only), so a client refreshes its controller
whichever it reads. No authorization (odradek has no ACLs).

Authorization (Kafka's): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.controller.decisions import ElectionType
from odradek.controller.elections import ElectionResult, ElectionResults
from odradek.controller.waiters import wait_until
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.context import RequestContext

API_KEY = ApiKey.ELECT_LEADERS
MIN_VERSION = 0
MAX_VERSION = 2

TIMED_OUT = ElectionResult(error=ErrorCode.REQUEST_TIMED_OUT, message="Timed out waiting for the new leader.")


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    require_cluster(ctx, AclOperation.ALTER)
    controller = ctx.broker.controller
    if controller is None:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, f"Broker {ctx.broker.broker_id} is not the controller.")
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Unknown election type {request.election_type}"
        ) from None
    asked = _asked(request)
    results = await controller.elect_leaders(election_type, asked)
    results = await _once_cached(ctx, results, request.timeout_ms / 1000)
    if asked is None:
        results = {tp: r for tp, r in results.items() if r.error != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(results)


def _asked(request: ElectLeadersRequest) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


async def _once_cached(ctx: RequestContext, results: ElectionResults, timeout_s: float) -> ElectionResults:
    """`results`, once this broker's metadata cache names each elected partition's new leader
    (REQUEST_TIMED_OUT for those it does not name within `timeout_s`)."""
    cache = ctx.broker.metadata_cache
    elected = {tp: r.leader for tp, r in results.items() if r.error == ErrorCode.NONE}

    def cached(tp: tuple[str, int]) -> bool:
        state = cache.partition(*tp)
        return state is not None and state.leader == elected[tp]

    await wait_until(lambda: all(cached(tp) for tp in elected), max(timeout_s, 0.0), cache.changed)
    return {tp: TIMED_OUT if tp in elected and not cached(tp) else r for tp, r in results.items()}


# Kafka's messages for the partition outcomes that carry one without a cause of their own
_MESSAGES = {ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition."}


def _response(results: ElectionResults) -> ElectLeadersResponse:
    by_topic: dict[str, ElectLeadersResponse.ReplicaElectionResult] = {}
    for (name, index), result in results.items():
        topic = by_topic.setdefault(name, ElectLeadersResponse.ReplicaElectionResult(topic=name))
        topic.partition_result.append(
            ElectLeadersResponse.PartitionResult(
                partition_id=index,
                error_code=result.error,
                error_message=result.message or _MESSAGES.get(result.error),
            )
        )
    return ElectLeadersResponse(replica_election_results=list(by_topic.values()))


def error_response(request: ElectLeadersRequest, version: int, code: int) -> ElectLeadersResponse:
    failed = {tp: ElectionResult(error=ErrorCode(code)) for tp in _asked(request) or ()}
    response = _response(failed)
    response.error_code = code
    return response
