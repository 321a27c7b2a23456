"""The share persister's retries (server/share_persister.py) and what a share client is answered for
a failed state operation (server/share_partitions.py `state_error`), against a scripted share
coordinator in process."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.coordinator.share_records import ShareState, StateKey
from odradek.protocol.errors import ErrorCode
from odradek.server import share_persister
from odradek.server.share_partitions import state_error
from odradek.server.share_persister import SharePersister

KEY = StateKey("g", uuid.UUID(int=7), 0)
STATE = ShareState(0, 0, 5, ())


class ScriptedCoordinator:
    """This broker's share coordinator, answering each read with the next error of `errors`."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = errors
        self.reads = 0

    async def find_coordinator(self, key: str) -> Any:
        return SimpleNamespace(error_code=ErrorCode.NONE, node=SimpleNamespace(broker_id=1))

    async def read_state(self, key: StateKey) -> tuple[int, ShareState | None]:
        self.reads += 1
        error = self.errors.pop(0) if self.errors else ErrorCode.NONE
        return error, None if error else STATE


def read(errors: list[int]) -> tuple[tuple[int, ShareState | None], int]:
    coordinator = ScriptedCoordinator(errors)
    persister = SharePersister(1, "INTERNAL", 1000, coordinator, None)  # type: ignore[arg-type]
    return asyncio.run(persister.read_state(KEY)), coordinator.reads


@pytest.fixture(autouse=True)
def short_backoffs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(share_persister, "RETRY_BACKOFF_MS", (1, 1, 1))


def test_a_share_coordinator_still_loading_is_asked_again_until_it_answers() -> None:
    loading = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR]
    assert read(loading) == ((ErrorCode.NONE, STATE), 3)


def test_the_last_answer_is_given_once_the_retries_run_out() -> None:
    assert read([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 10) == (
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None),
        4,
    )


def test_other_errors_are_not_retried() -> None:
    assert read([ErrorCode.FENCED_STATE_EPOCH]) == ((ErrorCode.FENCED_STATE_EPOCH, None), 1)


def test_a_share_client_is_answered_as_by_kafkas_share_partition_leader() -> None:
    assert state_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert state_error(ErrorCode.NOT_COORDINATOR) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert state_error(ErrorCode.FENCED_LEADER_EPOCH) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert state_error(ErrorCode.FENCED_STATE_EPOCH) == ErrorCode.FENCED_STATE_EPOCH
    assert state_error(ErrorCode.NONE) == ErrorCode.NONE
