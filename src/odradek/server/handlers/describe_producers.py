"""DescribeProducers handler: the idempotent and transactional producers a partition leader knows.

API: v0.

Behaviour (Kafka's, served by each partition's leader; admin clients send it there): per partition
asked, the producers in the leader's producer state (ReplicaManager.active_producers)
(`storage/producer_state.py`): producer id and epoch, the last sequence written (-1 when only a
marker of that epoch is known), the timestamp of the producer's last batch or marker, the
coordinator epoch of its last marker (-1: none) and the first offset of its ongoing transaction (-1:
none). A partition this broker hosts but does not lead: NOT_LEADER_OR_FOLLOWER; one it does not
host: NOT_LEADER_OR_FOLLOWER when the cluster has it, UNKNOWN_TOPIC_OR_PARTITION otherwise.
throttle_time_ms comes from the request quota.

Authorization (Kafka's): READ on each topic; a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import refusing_topics
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_PRODUCERS
MIN_VERSION = 0
MAX_VERSION = 0

_UNKNOWN = "This server does not host this topic-partition."  # Kafka's message for an unknown topic

_REFUSED = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed."}  # Kafka's message

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return await refusing_topics(ctx, request, AclOperation.READ, _handle, error_response)


async def _handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            TopicResponse(name=t.name, partitions=[_partition(ctx, t.name, p) for p in t.partition_indexes])
            for t in request.topics
        ]
    )


def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    code, producers = ctx.broker.replica_manager.active_producers(topic, index)
    known = ctx.broker.metadata_cache.topic(topic) is not None  # Kafka names only an unknown topic
    return PartitionResponse(
        partition_index=index,
        error_code=code,
        error_message=_UNKNOWN if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not known else None,
        active_producers=[
            ProducerState(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
            )
            for entry in producers
        ],
    )


def error_response(request: DescribeProducersRequest, version: int, code: int) -> DescribeProducersResponse:
    message = _REFUSED.get(code)
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[
                    PartitionResponse(partition_index=p, error_code=code, error_message=message)
                    for p in t.partition_indexes
                ],
            )
            for t in request.topics
        ]
    )
