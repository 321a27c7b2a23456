"""The producer id allocator behind InitProducerId over its single-node block file: durable blocks,
no reuse, refusing to guess."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from odradek.controller.producer_ids import (
    LONG_MAX,
    PRODUCER_ID_BLOCK_FILE,
    FileProducerIdBlockSource,
    ProducerIdBlock,
    ProducerIdManager,
    read_block,
)
from odradek.protocol.errors import ErrorCode, KafkaError


def file_manager(log_dir: Path, broker_id: int = 0, block_size: int = 1000) -> ProducerIdManager:
    return ProducerIdManager(FileProducerIdBlockSource(log_dir, broker_id), block_size)


def generate(manager: ProducerIdManager, count: int = 1) -> list[int]:
    """`count` ids taken one after the other, on a loop of their own."""

    async def take() -> list[int]:
        return [await manager.generate_producer_id() for _ in range(count)]

    return asyncio.run(take())


def test_ids_are_dense_within_a_block_and_the_block_is_recorded_first(tmp_path: Path) -> None:
    manager = file_manager(tmp_path, broker_id=3, block_size=10)
    assert not (tmp_path / PRODUCER_ID_BLOCK_FILE).exists()
    assert generate(manager, 10) == list(range(10))
    assert read_block(tmp_path / PRODUCER_ID_BLOCK_FILE) == ProducerIdBlock(3, 0, 9)
    assert generate(manager) == [10]
    recorded = json.loads((tmp_path / PRODUCER_ID_BLOCK_FILE).read_text())
    assert recorded == {"version": 1, "broker": 3, "block_start": "10", "block_end": "19"}


def test_a_new_manager_continues_after_the_recorded_block(tmp_path: Path) -> None:
    assert generate(file_manager(tmp_path, block_size=10)) == [0]
    assert generate(file_manager(tmp_path, block_size=10)) == [10]


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"version": 2, "broker": 0, "block_start": "0", "block_end": "9"}', b'{"version": 1}'],
)
def test_an_unreadable_block_file_is_never_guessed_over(tmp_path: Path, content: bytes) -> None:
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_bytes(content)
    with pytest.raises(KafkaError) as failed:
        generate(file_manager(tmp_path))
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_bytes() == content


def test_exhausted_ids_fail(tmp_path: Path) -> None:
    last = {"version": 1, "broker": 0, "block_start": str(LONG_MAX - 9), "block_end": str(LONG_MAX)}
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_text(json.dumps(last))
    with pytest.raises(KafkaError) as failed:
        generate(file_manager(tmp_path, block_size=10))
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_concurrent_callers_never_share_an_id(tmp_path: Path) -> None:
    manager = file_manager(tmp_path, block_size=7)

    async def callers() -> list[int]:
        return await asyncio.gather(*(manager.generate_producer_id() for _ in range(200)))

    assert sorted(asyncio.run(callers())) == list(range(200))
