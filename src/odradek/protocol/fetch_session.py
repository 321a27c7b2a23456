"""The fetch session fields' values (KIP-227), shared by the broker's session cache
(server/fetch_session.py) and the fetching side (client/fetch_session.py).

Owns: the session id that names no session, the epochs that open (INITIAL_EPOCH) or avoid or close
(FINAL_EPOCH) a session, the epoch after a given one (wrapping to 1 after INT32_MAX), and the
top-level errors that concern the session itself.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1
