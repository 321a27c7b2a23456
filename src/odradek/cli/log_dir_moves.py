"""The log dir moves of `reassign-partitions` (Kafka's ReassignPartitionsCommand's replica moves).

Owns, for a reassignment file's `"log_dirs"` (per partition, one entry per replica: `"any"` or the
absolute path of a log dir on that replica's broker), the replica moves it asks for, keyed by
replica (topic, partition, broker; printed as Kafka's TopicPartitionReplica, `topic-partition-broker`):
- `parse`: the moves of one file entry ("any" asks for none); a list whose length differs from the
  replicas' is refused as Kafka refuses it.
- `execute`: AlterReplicaLogDirs to each broker named, answered REPLICA_NOT_AVAILABLE while the
  replica is not there yet (a reassignment is adding it) and asked again every RETRY_S until
  --timeout; prints "Successfully started log directory move(s) for: ..." per round that started
  some, fails with "Timed out before log directory move(s) could be started for: ..." or "Failed to
  alter dir for REPLICA" (any other error).
- `states` / `report`: where each replica is (DescribeLogDirs on its broker: the current and the
  future replica's dirs) and Kafka's line for each: completed, still in progress, being moved
  elsewhere, not being moved, not found; `in_progress` is whether any is still moving.

Callers: cli/reassign_partitions.py (--execute, --verify, --cancel).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import ToolError, joined
from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest

Replica = tuple[str, int, int]  # topic, partition, broker
ANY_LOG_DIR = "any"
RETRY_S = 0.1


@dataclass(frozen=True, slots=True)
class ReplicaLogDirs:
    """Where a replica is on its broker: its current and future replica's log dirs (None: none)."""

    current: str | None
    future: str | None


def name(replica: Replica) -> str:
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


def parse(topic: str, partition: int, replicas: list[int], log_dirs: Any) -> dict[Replica, str]:
    """The moves a file entry asks for: its `log_dirs` (None: every replica "any")."""
    if log_dirs is None:
        return {}
    if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
        raise ToolError(f'Error: "log_dirs" of {topic}-{partition} must be a list of strings')
    if len(log_dirs) != len(replicas):
        raise ToolError(
            f"Error: Size of replicas list [{joined(replicas)}] is different from size of log dirs list "
            f"[{joined(log_dirs)}] for partition {topic}-{partition}"
        )
    return {(topic, partition, r): d for r, d in zip(replicas, log_dirs, strict=True) if d != ANY_LOG_DIR}


# ---------------------------------------------------------------------------------------------
# starting moves


def execute(client: KafkaClient, moves: Mapping[Replica, str], timeout_ms: int) -> None:
    """Start the moves, asking again for the replicas not on their broker yet until `timeout_ms`."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        started = _alter(client, pending)
        if started:
            plural = "" if len(started) == 1 else "s"
            print(
                f"Successfully started log directory move{plural} for: {joined(map(name, sorted(started)))}"
            )
        for replica in started:
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            plural = "" if len(pending) == 1 else "s"
            raise ToolError(
                f"Error: Timed out before log directory move{plural} could be started for: "
                f"{joined(map(name, sorted(pending)))}"
            )
        time.sleep(RETRY_S)


def _alter(client: KafkaClient, moves: Mapping[Replica, str]) -> list[Replica]:
    """One AlterReplicaLogDirs per broker; the replicas whose move started (REPLICA_NOT_AVAILABLE
    and an unreachable broker: not yet; any other error fails)."""
    started: list[Replica] = []
    brokers = _brokers(client)
    for broker_id, replicas in _by_broker(moves).items():
        by_dir: dict[str, dict[str, list[int]]] = {}
        for topic, partition, _ in replicas:
            by_dir.setdefault(moves[(topic, partition, broker_id)], {}).setdefault(topic, []).append(
                partition
            )
        request = AlterReplicaLogDirsRequest(
            dirs=[
                AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                    path,
                    [AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(t, p) for t, p in topics.items()],
                )
                for path, topics in by_dir.items()
            ]
        )
        response = _ask(client, brokers.get(broker_id), ApiKey.ALTER_REPLICA_LOG_DIRS, request)
        for result in response.results if response is not None else ():
            for p in result.partitions:
                replica = (result.topic_name, p.partition_index, broker_id)
                if p.error_code == ErrorCode.NONE:
                    started.append(replica)
                elif p.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                    raise ToolError(
                        f"Error: Failed to alter dir for {name(replica)}: {ErrorCode(p.error_code).name}"
                    )
    return started


# ---------------------------------------------------------------------------------------------
# where the replicas are


def states(client: KafkaClient, replicas: Iterable[Replica]) -> dict[Replica, ReplicaLogDirs | None]:
    """Each replica's log dirs on its broker (None: the broker could not be asked)."""
    brokers = _brokers(client)
    found: dict[Replica, ReplicaLogDirs | None] = {}
    for broker_id, wanted in _by_broker(replicas).items():
        by_topic: dict[str, list[int]] = {}
        for topic, partition, _ in wanted:
            by_topic.setdefault(topic, []).append(partition)
        request = DescribeLogDirsRequest(
            topics=[DescribeLogDirsRequest.DescribableLogDirTopic(t, p) for t, p in by_topic.items()]
        )
        response = _ask(client, brokers.get(broker_id), ApiKey.DESCRIBE_LOG_DIRS, request)
        dirs: dict[tuple[str, int], dict[bool, str]] = {}
        for result in response.results if response is not None else ():
            for topic in result.topics if result.error_code == ErrorCode.NONE else ():
                for p in topic.partitions:
                    dirs.setdefault((topic.name, p.partition_index), {})[p.is_future_key] = result.log_dir
        for replica in wanted:
            held = dirs.get(replica[:2], {})
            found[replica] = None if response is None else ReplicaLogDirs(held.get(False), held.get(True))
    return found


def report(targets: Mapping[Replica, str], found: Mapping[Replica, ReplicaLogDirs | None]) -> list[str]:
    """Kafka's line for each move, in replica order."""
    return [_line(replica, targets[replica], found[replica]) for replica in sorted(targets)]


def _line(replica: Replica, target: str, found: ReplicaLogDirs | None) -> str:
    topic, partition, broker = replica
    if found is None:
        return f"Partition {topic}-{partition} cannot be found in any live log directory on broker {broker}."
    if found.current is None:
        return (
            f"Partition {topic}-{partition} is not found in any live log dir on broker {broker}. There is "
            "likely an offline log directory on the broker."
        )
    if found.future is None:
        if found.current == target:
            return f"Reassignment of replica {name(replica)} completed successfully."
        return (
            f"Partition {topic}-{partition} on broker {broker} is not being moved from log dir "
            f"{found.current} to {target}."
        )
    if found.future == target:
        return f"Reassignment of replica {name(replica)} is still in progress."
    return (
        f"Partition {topic}-{partition} on broker {broker} is being moved to log dir {found.future} "
        f"instead of {target}."
    )


def in_progress(found: Mapping[Replica, ReplicaLogDirs | None]) -> bool:
    return any(
        dirs is not None and dirs.current is not None and dirs.future is not None for dirs in found.values()
    )


def active(found: Mapping[Replica, ReplicaLogDirs | None]) -> dict[Replica, str]:
    """The replicas moving, each with its current log dir (--cancel moves them back there)."""
    return {
        replica: dirs.current
        for replica, dirs in found.items()
        if dirs is not None and dirs.current is not None and dirs.future is not None
    }


# ---------------------------------------------------------------------------------------------


def _brokers(client: KafkaClient) -> dict[int, Any]:
    return dict(client.metadata([]).brokers)


def _by_broker(replicas: Iterable[Replica]) -> dict[int, list[Replica]]:
    grouped: dict[int, list[Replica]] = {}
    for replica in sorted(replicas):
        grouped.setdefault(replica[2], []).append(replica)
    return grouped


def _ask(client: KafkaClient, broker: Any, api_key: int, request: Any) -> Any:
    """`request` answered by `broker`; None when it is not live or cannot be reached."""
    if broker is None:
        return None
    try:
        return client.connect_to(broker.host, broker.port).request(api_key, request)
    except OSError:
        return None
