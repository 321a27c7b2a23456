"""WriteTxnMarkers handler: the transaction coordinator's request writing COMMIT/ABORT markers.

API: v0-v1.

Behaviour (Kafka's): every marker of the request is appended to each of its partitions as a control
batch by this broker as their leader (`Broker.write_txn_markers`, Kafka's appendRecords with origin
Coordinator and acks=-1), and each partition answers once its high watermark passed the marker
or after request.timeout.ms (REQUEST_TIMED_OUT). The markers of one request are written in request
order and waited for together. A marker on a `__consumer_offsets` partition completes the producer's
pending transactional offset commits there (TxnOffsetCommit), as Kafka's group coordinator does.
Per partition errors: UNKNOWN_TOPIC_OR_PARTITION (not in the cluster),
NOT_LEADER_OR_FOLLOWER (hosted elsewhere or followed here), NOT_ENOUGH_REPLICAS (ISR below
min.insync.replicas), INVALID_PRODUCER_EPOCH (a producer epoch older than the partition's),
TRANSACTION_COORDINATOR_FENCED (a coordinator epoch older than the producer's last marker),
KAFKA_STORAGE_ERROR.

Authorization (Kafka's): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition and a WARNING naming the peer and the principal (server/authz.py).

Deliberate deviations: a
partition of the cluster that this broker does not host answers NOT_LEADER_OR_FOLLOWER, as Produce
does here (Kafka answers UNKNOWN_TOPIC_OR_PARTITION; its coordinator retries after either). odradek's
transaction coordinator writes the markers of the partitions its own broker leads directly, without
this request, and sends it to the other leaders.
"""

from __future__ import annotations

import asyncio

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from odradek.replication.types import TopicPartition, TxnMarker
from odradek.server.authz import require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.WRITE_TXN_MARKERS
MIN_VERSION = 0
MAX_VERSION = 1

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    require_cluster_action(ctx)
    timeout_ms = ctx.broker.config["request.timeout.ms"]
    results = await asyncio.gather(*(_write(ctx, marker, timeout_ms) for marker in request.markers))
    return WriteTxnMarkersResponse(markers=list(results))


async def _write(
    ctx: RequestContext, marker: WriteTxnMarkersRequest.WritableTxnMarker, timeout_ms: int
) -> MarkerResult:
    keys = [TopicPartition(topic.name, index) for topic in marker.topics for index in topic.partition_indexes]
    errors = await ctx.broker.write_txn_markers(
        TxnMarker(
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result
        ),
        keys,
        timeout_ms,
    )
    return MarkerResult(
        producer_id=marker.producer_id,
        topics=[
            TopicResult(
                name=topic.name,
                partitions=[
                    PartitionResult(index, errors[TopicPartition(topic.name, index)])
                    for index in topic.partition_indexes
                ],
            )
            for topic in marker.topics
        ],
    )


def error_response(request: WriteTxnMarkersRequest, version: int, code: int) -> WriteTxnMarkersResponse:
    """Every partition of every marker answering `code`."""
    return WriteTxnMarkersResponse(
        markers=[
            MarkerResult(
                producer_id=marker.producer_id,
                topics=[
                    TopicResult(t.name, [PartitionResult(i, code) for i in t.partition_indexes])
                    for t in marker.topics
                ],
            )
            for marker in request.markers
        ]
    )
