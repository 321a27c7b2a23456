"""AlterReplicaLogDirs handler: move replicas between this broker's log dirs (KIP-113).

API: v0-v2.

Behaviour (Kafka's): the request names, per destination log dir (its absolute path), the partitions
to move there; a partition named under two dirs goes to the last. Each is decided by
`ReplicaManager.alter_replica_log_dirs` and answered when its move has started, not when it completes
(the copy runs in the background: replication/alter_log_dirs.py; DescribeLogDirs shows the future
replica while it copies). Per partition: LOG_DIR_NOT_FOUND (a path that is not a log dir of this
broker), KAFKA_STORAGE_ERROR (an offline log dir), REPLICA_NOT_AVAILABLE (a replica this broker
does not host yet: it will be created in that dir), INVALID_TOPIC_EXCEPTION (a future log's
directory name would pass 255 characters); NONE otherwise, including a move to the dir the replica
is already in (which cancels a move in progress elsewhere). Results are grouped by topic.

odradek has no ACLs, so the CLUSTER ALTER check Kafka makes always passes.

Authorization (Kafka's): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import defaultdict

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS
MIN_VERSION = 0
MAX_VERSION = 2

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    require_cluster(ctx, AclOperation.ALTER)
    destinations = {
        (topic.name, partition): entry.path
        for entry in request.dirs
        for topic in entry.topics
        for partition in topic.partitions
    }
    codes = await ctx.broker.replica_manager.alter_replica_log_dirs(destinations)
    return _response(codes)


def _response(codes: dict[tuple[str, int], int]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[PartitionResult]] = defaultdict(list)
    for (topic, partition), code in codes.items():
        by_topic[topic].append(PartitionResult(partition_index=partition, error_code=code))
    return AlterReplicaLogDirsResponse(
        results=[TopicResult(topic_name=name, partitions=partitions) for name, partitions in by_topic.items()]
    )


def error_response(
    request: AlterReplicaLogDirsRequest, version: int, code: int
) -> AlterReplicaLogDirsResponse:
    return _response(
        {
            (topic.name, partition): code
            for entry in request.dirs
            for topic in entry.topics
            for partition in topic.partitions
        }
    )
