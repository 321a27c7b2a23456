"""InitProducerId handler.

API: v0-v5.

Behaviour (Kafka 3.9's):
- producer_id and producer_epoch (v3+) must be both -1 or both set: INVALID_REQUEST otherwise;
- transactional_id null: a new producer id, epoch 0. A producer id and epoch given with it (KIP-360)
  change nothing: as in Kafka, a producer without a transactional id always gets a fresh id (the
  Java client bumps an idempotent producer's epoch on its own and only asks for a new id when the
  epoch is exhausted or its sequences cannot be repaired);
- transactional_id "": INVALID_REQUEST; transaction_timeout_ms outside (0, transaction.max.timeout.ms]:
  INVALID_TRANSACTION_TIMEOUT (Kafka checks both before consulting the transaction state);
- any other transactional_id: the transaction coordinator's answer
  (coordinator/txn_coordinator.py): the id's producer id at its next epoch (a new producer id the
  first time, or when the epoch is exhausted); an Ongoing transaction of the previous producer is
  aborted at a bumped epoch first, answering CONCURRENT_TRANSACTIONS until its markers are written;
  a transaction being committed or aborted answers CONCURRENT_TRANSACTIONS; NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS when the id's `__transaction_state` partition is not led here or
  still loading. A producer id and epoch given (v3+, KIP-360) are checked as Kafka's
  TransactionCoordinator does: the current epoch is bumped (and remembered); the epoch before a bump
  already done is a retry of that request, answered with the current producer id and epoch without
  another bump; the previous producer id with an exhausted epoch is the retry of a request that
  gave the id a new producer id, answered the same way; anything else answers PRODUCER_FENCED (v4+;
  INVALID_PRODUCER_EPOCH before). The remembered epoch lives in memory only, as in Kafka 3.9: a
  retry that spans a coordinator change is fenced.
An error answers producer_id -1 and producer_epoch -1. Producer ids come from the broker's
`ProducerIdManager` (controller/producer_ids.py), in blocks of 1000 claimed as Kafka's ZooKeeper mode
does: in ZooKeeper mode by a conditional write of `/latest_producer_id_block`, so ids are unique
across the cluster; on a single node the same record lives in `<first log dir>/producer-id-block`
(one fsync on the event loop per 1000 ids). Ids are never reused, across restarts included.

Deliberate deviations: a Kafka 3.x broker asks its
controller for id blocks (AllocateProducerIds) and the controller claims them in ZooKeeper; an
odradek broker claims them in ZooKeeper itself, as Kafka 2.x brokers do (same znode, same JSON).
throttle_time_ms comes from the request quota.

Authorization (Kafka's): a transactional id needs WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE
on some topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize_cluster, require_transactional_id
from odradek.server.context import RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
MIN_VERSION = 0
MAX_VERSION = 5

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        pair = f"producer id {request.producer_id} and epoch {request.producer_epoch}"
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{pair} must be both set or both -1")
    if request.transactional_id is not None:
        require_transactional_id(ctx, AclOperation.WRITE, request.transactional_id)
        return await _init_transactional(ctx, request, request.transactional_id)
    if not authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False):
        if not ctx.broker.authorizer.authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
            raise KafkaError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "idempotent producer needs IDEMPOTENT_WRITE"
            )
    producer_id = await ctx.broker.producer_id_manager.generate_producer_id()
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)


async def _init_transactional(
    ctx: RequestContext, request: InitProducerIdRequest, transactional_id: str
) -> InitProducerIdResponse:
    if transactional_id == "":
        raise KafkaError(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
    max_timeout_ms = ctx.broker.config["transaction.max.timeout.ms"]
    if not 0 < request.transaction_timeout_ms <= max_timeout_ms:
        raise KafkaError(
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
            f"transaction timeout {request.transaction_timeout_ms} ms is outside (0, {max_timeout_ms}]",
        )
    error, producer_id, epoch = await ctx.broker.txn_coordinator.init_producer_id(
        transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=error, producer_id=producer_id, producer_epoch=epoch)


def error_response(request: InitProducerIdRequest, version: int, code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )
