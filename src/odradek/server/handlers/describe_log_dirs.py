"""DescribeLogDirs handler.

API: v0-v5.

Behaviour: one result per directory of log.dirs (its absolute path), listing the partitions whose
logs it holds, each with its size in bytes (every segment's `.log` bytes) and its offset lag: for a
current replica the high watermark minus the log end offset when it is positive, 0 otherwise; for a
future replica (is_future_key true: the copy of a replica moving to this dir, AlterReplicaLogDirs)
the current log's end offset minus the future's, as Kafka reports them. `topics` null asks for every
partition, else only the named ones. v4 adds the
directory's total and usable bytes (the file system's, as Kafka reports them); v5 adds whether the
directory is cordoned (Kafka 4's way to stop placing new replicas on it): never, odradek has no
cordoned log dirs. A directory that
cannot be read answers KAFKA_STORAGE_ERROR with no topics.

throttle_time_ms comes from the request quota.

Authorization (Kafka's): DESCRIBE on the cluster, else no log dirs (and, v3+,
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import authorize_cluster
from odradek.server.context import RequestContext
from odradek.storage.log import Log

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
MIN_VERSION = 0
MAX_VERSION = 5

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[Path, list[Log]] = defaultdict(list)
    log_manager = ctx.broker.log_manager
    for found in log_manager.all_logs() + log_manager.future_logs():
        if wanted is None or (found.topic, found.partition) in wanted:
            by_dir[found.dir.parent.resolve()].append(found)
    return DescribeLogDirsResponse(
        results=[
            _describe(ctx, Path(d).resolve(), by_dir[Path(d).resolve()]) for d in ctx.broker.config.log_dirs
        ]
    )


def _describe(ctx: RequestContext, directory: Path, logs: list[Log]) -> Result:
    try:
        usage = shutil.disk_usage(directory)
    except OSError:
        return Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(directory))
    by_topic: dict[str, list[PartitionResult]] = defaultdict(list)
    for found in sorted(logs, key=lambda entry: (entry.topic, entry.partition, entry.is_future)):
        by_topic[found.topic].append(
            PartitionResult(
                partition_index=found.partition,
                partition_size=found.size_in_bytes,
                offset_lag=_lag(ctx, found),
                is_future_key=found.is_future,
            )
        )
    return Result(
        log_dir=str(directory),
        topics=[TopicResult(name=name, partitions=partitions) for name, partitions in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )


def _lag(ctx: RequestContext, found: Log) -> int:
    hosted = ctx.broker.replica_manager.partition(found.topic, found.partition)
    if hosted is None:
        return 0
    if found.is_future:
        return hosted.log_end_offset - found.log_end_offset
    return max(hosted.high_watermark - found.log_end_offset, 0)
