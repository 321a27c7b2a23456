"""The producer id allocator behind InitProducerId: durable blocks, no reuse, refusing to guess."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from odradek.controller.producer_ids import (
    LONG_MAX,
    PRODUCER_ID_BLOCK_FILE,
    ProducerIdBlock,
    ProducerIdManager,
    read_block,
)
from odradek.protocol.errors import ErrorCode, KafkaError


def test_ids_are_dense_within_a_block_and_the_block_is_recorded_first(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, broker_id=3, block_size=10)
    assert not (tmp_path / PRODUCER_ID_BLOCK_FILE).exists()
    assert [manager.generate_producer_id() for _ in range(10)] == list(range(10))
    assert read_block(tmp_path / PRODUCER_ID_BLOCK_FILE) == ProducerIdBlock(3, 0, 9)
    assert manager.generate_producer_id() == 10
    recorded = json.loads((tmp_path / PRODUCER_ID_BLOCK_FILE).read_text())
    assert recorded == {"version": 1, "broker": 3, "block_start": "10", "block_end": "19"}


def test_a_new_manager_continues_after_the_recorded_block(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, broker_id=0, block_size=10)
    assert first.generate_producer_id() == 0
    second = ProducerIdManager(tmp_path, broker_id=0, block_size=10)
    assert second.generate_producer_id() == 10


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"version": 2, "broker": 0, "block_start": "0", "block_end": "9"}', b'{"version": 1}'],
)
def test_an_unreadable_block_file_is_never_guessed_over(tmp_path: Path, content: bytes) -> None:
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_bytes(content)
    with pytest.raises(KafkaError) as failed:
        ProducerIdManager(tmp_path, broker_id=0).generate_producer_id()
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_bytes() == content


def test_exhausted_ids_fail(tmp_path: Path) -> None:
    last = {"version": 1, "broker": 0, "block_start": str(LONG_MAX - 9), "block_end": str(LONG_MAX)}
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_text(json.dumps(last))
    with pytest.raises(KafkaError) as failed:
        ProducerIdManager(tmp_path, broker_id=0, block_size=10).generate_producer_id()
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_concurrent_callers_never_share_an_id(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, broker_id=0, block_size=7)
    results: list[list[int]] = [[] for _ in range(4)]

    def worker(out: list[int]) -> None:
        out.extend(manager.generate_producer_id() for _ in range(50))

    threads = [threading.Thread(target=worker, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handed_out = sorted(i for out in results for i in out)
    assert handed_out == list(range(200))
