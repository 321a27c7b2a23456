"""The fetching side of a fetch session (KIP-227; Kafka's FetchSessionHandler).

Owns, for one fetcher and one broker, the session's id and epoch and what the broker's session
holds of each partition (what was last sent of it). The broker side is server/fetch_session.py.

Behaviour (Kafka's):
- With no session, a request is full: every wanted partition, epoch 0 (INITIAL_EPOCH), which asks
  the broker to create a session. A response with a session id opens it at epoch 1; one without
  (no free slot) leaves the next request full again.
- In a session, a request is incremental: it names the partitions that are new or whose fetch
  state changed since they were last sent, and forgets those no longer wanted; each one increments
  the epoch (after INT32_MAX, 1). The response names only the partitions with something to say
  (records, moved offsets, an error); the others are as last answered.
- A top-level error in the response (the session errors FETCH_SESSION_ID_NOT_FOUND,
  INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR, or another) or a request that failed
  (no answer) makes the next request full: epoch 0, naming the session to close (Kafka's
  nextCloseExisting), or none after FETCH_SESSION_ID_NOT_FOUND. After a session error the caller
  may fetch again at once (protocol/fetch_session.py's `SESSION_ERRORS`).
- A partition's fetch state is any hashable value the caller chooses (it compares them and builds
  the request entries from the changed ones).

Callers: the replica fetcher (replication/fetcher.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

Key = TypeVar("Key", bound=Hashable)
State = TypeVar("State", bound=Hashable)


@dataclass(frozen=True, slots=True)
class FetchPlan(Generic[Key, State]):
    """One request's session fields and partitions: `send` the partitions to name (with their
    states), `forget` those to drop from the session."""

    session_id: int
    epoch: int
    send: dict[Key, State]
    forget: list[Key]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler(Generic[Key, State]):
    """A fetcher's session with one broker (see the module docstring)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[Key, State] = {}  # the session's partitions as the broker holds them

    def plan(
        self, wanted: Mapping[Key, State], changed: Iterable[Key] | None = None
    ) -> FetchPlan[Key, State]:
        """The next request for `wanted`; the session takes it as sent. `changed`: the keys whose
        state may differ from the last plan's or that left `wanted` since (None: any key may), so
        that an incremental plan looks at those only."""
        if self.epoch == INITIAL_EPOCH:
            self._sent = dict(wanted)
            return FetchPlan(self.session_id, INITIAL_EPOCH, dict(wanted), [])
        sent = self._sent
        if changed is None:
            send = {key: state for key, state in wanted.items() if sent.get(key) != state}
            forget = [key for key in sent if key not in wanted]
        else:
            send, forget = {}, []
            for key in changed:
                state = wanted.get(key)
                if state is None:
                    if key in sent:
                        forget.append(key)
                elif sent.get(key) != state:
                    send[key] = state
        for key in forget:
            del sent[key]
        sent.update(send)
        return FetchPlan(self.session_id, self.epoch, send, forget)

    def on_response(self, plan: FetchPlan[Key, State], error_code: int, session_id: int) -> None:
        """Move the session on after the answer to `plan` (a top-level error restarts it)."""
        if error_code != ErrorCode.NONE:
            unknown = error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            self._restart(INVALID_SESSION_ID if unknown else self.session_id)
        elif plan.full:
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        else:
            self.epoch = next_epoch(self.epoch)

    def on_failure(self) -> None:
        """The request got no answer: the next one is full and closes this session."""
        self._restart(self.session_id)

    def _restart(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._sent = {}
