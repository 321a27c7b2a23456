"""Kafka's rules for accepting controller requests on a broker, as pure functions.

Owns the per-partition decisions a broker makes before applying LeaderAndIsr or StopReplica
(Kafka's ReplicaManager.becomeLeaderOrFollower / stopReplicas, ZooKeeper mode); the whole request
was fenced by controller and broker epoch before (server/control_plane.py):
- LeaderAndIsr, per partition: a topic id that differs from the one this broker holds for the
  topic: INCONSISTENT_TOPIC_ID; a leader epoch newer than the current one is applied if this broker
  is among the replicas (else UNKNOWN_TOPIC_OR_PARTITION); an older one and an equal one are ignored
  with STALE_CONTROLLER_EPOCH;
- StopReplica, per partition: a leader epoch of -1 (no epoch) or -2 (topic deletion) or newer than
  the current one stops the replica; an older or equal one is ignored with FENCED_LEADER_EPOCH; a
  partition not hosted here stops (and its log is deleted if asked) with NONE.

"Current" leader epoch: of the hosted partition, or of the state waiting to be applied while its
log loads (-1 when neither).

Callers: the ReplicaManager; unit-tested in tests/server/test_replica_fencing.py.
"""

from __future__ import annotations

import uuid

from odradek.controller.metadata import EPOCH_DURING_DELETE
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import ZERO_UUID

NO_EPOCH = -1  # a leader or broker epoch that is not checked


def leader_and_isr_error(
    current_leader_epoch: int,
    request_leader_epoch: int,
    replicas: list[int] | tuple[int, ...],
    local_broker_id: int,
    request_topic_id: uuid.UUID,
    known_topic_id: uuid.UUID | None,
) -> ErrorCode:
    """NONE when the partition state is to be applied, else the partition's error code."""
    if known_topic_id not in (None, ZERO_UUID) and request_topic_id not in (ZERO_UUID, known_topic_id):
        return ErrorCode.INCONSISTENT_TOPIC_ID
    if request_leader_epoch > current_leader_epoch:
        return ErrorCode.NONE if local_broker_id in replicas else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.STALE_CONTROLLER_EPOCH


def stop_replica_error(current_leader_epoch: int | None, request_leader_epoch: int) -> ErrorCode:
    """NONE when the replica is to be stopped (`current_leader_epoch` None: not hosted here)."""
    if current_leader_epoch is None or request_leader_epoch in (NO_EPOCH, EPOCH_DURING_DELETE):
        return ErrorCode.NONE
    if request_leader_epoch > current_leader_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH
