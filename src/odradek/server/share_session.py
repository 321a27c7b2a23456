"""Share sessions (Kafka's ShareSessionCache, KIP-932): the partitions a share consumer member
fetches from this broker, kept between its ShareFetch requests.

Owns the sessions by (group id, member id), each with its share session epoch and its partitions
(topic id, partition) in the order they were added. Rules (Kafka's SharePartitionManager):
- ShareFetch epoch 0 opens a session (one of the same key is dropped first); acknowledgements in it
  are INVALID_REQUEST; a full cache (`group.share.max.share.sessions`) is SHARE_SESSION_NOT_FOUND;
- ShareFetch epoch -1 names no partition to fetch (INVALID_REQUEST), needs the session
  (SHARE_SESSION_NOT_FOUND) and closes it once its acknowledgements are done;
- any other epoch must be the session's (INVALID_SHARE_SESSION_EPOCH; no session:
  SHARE_SESSION_NOT_FOUND); the request's partitions are added, its forgotten ones removed, and the
  epoch moves to the next (after the largest int32, 1);
- ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 closes the session after the
  acknowledgements, any other epoch follows the ShareFetch rule.
The records a member holds are released when its session closes (server/share_partitions.py).

Pure bookkeeping on the event loop. Callers: server/share_partitions.py, tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SessionKey = tuple[str, str]  # (group id, member id)
SharePartitionId = tuple[uuid.UUID, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int
    partitions: dict[SharePartitionId, None] = field(default_factory=dict)  # insertion-ordered set


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(
        self, key: SessionKey, partitions: Iterable[SharePartitionId]
    ) -> tuple[int, ShareSession | None]:
        """A new session (epoch 0), replacing one of the same key: (error, session)."""
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        session = ShareSession(key, next_epoch(INITIAL_EPOCH), dict.fromkeys(partitions))
        self.sessions[key] = session
        return ErrorCode.NONE, session

    def check(self, key: SessionKey, epoch: int) -> tuple[int, ShareSession | None]:
        """The session an incremental (epoch > 0) or final (-1) request goes on: (error, session)."""
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def update(
        self, session: ShareSession, added: Iterable[SharePartitionId], forgotten: Iterable[SharePartitionId]
    ) -> None:
        for partition in added:
            session.partitions.setdefault(partition, None)
        for partition in forgotten:
            session.partitions.pop(partition, None)
        session.epoch = next_epoch(session.epoch)

    def close(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    def member_sessions(self, group_id: str) -> list[ShareSession]:
        return [s for (group, _), s in self.sessions.items() if group == group_id]
