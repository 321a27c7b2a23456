"""Producer id allocation: blocks of ids claimed from a durable, shared high-water mark.

Owns the `ProducerIdManager` (Kafka's ZooKeeper-mode ProducerIdManager): it claims blocks of 1000
producer ids from a block source and hands them out one by one. The record of the last block claimed
is Kafka's `/latest_producer_id_block` JSON,

    {"version":1,"broker":1,"block_start":"1000","block_end":"1999"}

(both ends inclusive; ids as strings, as in Kafka). Two block sources keep it:
- `ZkProducerIdBlockSource` (ZooKeeper mode): the znode itself, shared by the cluster. A claim reads
  the znode and its zkVersion and writes the next block conditionally on that version; when another
  broker claimed meanwhile (BadVersion) it reads again and retries. Ids are unique cluster-wide.
- `FileProducerIdBlockSource` (single node): the same JSON in a file of the first log dir,
  `producer-id-block`, replaced atomically (temp file, fsync, rename, fsync of the directory) on the
  event loop, once per block.

Invariants:
- A block is recorded durably before any id of it is handed out, so no id is ever handed out twice,
  across restarts included; the unused rest of a block is skipped after a restart, as in Kafka.
- A record that does not parse is never guessed over: allocation fails with UNKNOWN_SERVER_ERROR
  until it is repaired, since starting again from 0 would reuse ids (an empty file included). No
  file, or the empty znode brokers create at start-up, means nothing was claimed: the first block
  starts at 0.
- Ids run from 0 to 2**63 - 1; when they are exhausted allocation fails (UNKNOWN_SERVER_ERROR), as
  Kafka's does. A ZooKeeper failure fails the allocation too (UNKNOWN_SERVER_ERROR, by the
  dispatcher); the next call tries again.
Runs on the event loop; one asyncio lock serializes claims, so concurrent callers never share an id.

Callers: the broker, which creates its manager (handlers reach it as `broker.producer_id_manager`);
the InitProducerId handler.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from odradek.controller.zk.znodes import (
    PRODUCER_ID_BLOCK_PATH,
    ProducerIdBlock,
    ZNodeFormatError,
    encode_producer_id_block,
)
from odradek.durable_file import write_atomically
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.controller.zk.client import KafkaZkClient

__all__ = [
    "FileProducerIdBlockSource",
    "ProducerIdBlock",
    "ProducerIdBlockSource",
    "ProducerIdManager",
    "ZkProducerIdBlockSource",
]

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_FILE = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000
BLOCK_VERSION = 1
LONG_MAX = 2**63 - 1


class ProducerIdBlockSource(Protocol):
    """Where blocks are claimed: each call records and returns a block no one claimed before."""

    async def claim_next_block(self, block_size: int) -> ProducerIdBlock: ...


class ProducerIdManager:
    """Hands out producer ids from blocks claimed from `source`."""

    def __init__(self, source: ProducerIdBlockSource, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.source = source
        self.block_size = block_size
        self._lock = asyncio.Lock()
        self._next_id = 0
        self._block_end = -1  # nothing claimed yet

    async def generate_producer_id(self) -> int:
        """A producer id never handed out before; raises KafkaError(UNKNOWN_SERVER_ERROR) when the
        record of the last block is unreadable or the ids are exhausted."""
        async with self._lock:
            if self._next_id > self._block_end:
                block = await self.source.claim_next_block(self.block_size)
                self._next_id, self._block_end = block.block_start, block.block_end
            producer_id = self._next_id
            self._next_id += 1
            return producer_id


class FileProducerIdBlockSource:
    """Blocks recorded in `<log_dir>/producer-id-block` (single node)."""

    def __init__(self, log_dir: str | Path, broker_id: int) -> None:
        self.path = Path(log_dir) / PRODUCER_ID_BLOCK_FILE
        self.broker_id = broker_id

    async def claim_next_block(self, block_size: int) -> ProducerIdBlock:
        block = next_block(read_block(self.path), self.broker_id, block_size)
        try:
            write_atomically(self.path, encode_producer_id_block(block))
        except OSError as exc:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot record {self.path}: {exc}") from exc
        return block


class ZkProducerIdBlockSource:
    """Blocks claimed by conditional writes of `/latest_producer_id_block` (ZooKeeper mode)."""

    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id

    async def claim_next_block(self, block_size: int) -> ProducerIdBlock:
        while True:
            previous, zk_version = await self._latest()
            block = next_block(previous, self.broker_id, block_size)
            if await self.zk.conditional_update_producer_id_block(block, zk_version):
                return block
            log.debug("Another broker claimed a producer id block first: reading the znode again")

    async def _latest(self) -> tuple[ProducerIdBlock | None, int]:
        path = PRODUCER_ID_BLOCK_PATH
        try:
            previous, zk_version = await self.zk.latest_producer_id_block()
        except ZNodeFormatError as exc:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"unreadable {path}: {exc}") from exc
        return (None if previous is None else _checked(previous, path)), zk_version


def next_block(previous: ProducerIdBlock | None, broker_id: int, block_size: int) -> ProducerIdBlock:
    """The block after `previous` (the first one when None); UNKNOWN_SERVER_ERROR when exhausted."""
    start = 0 if previous is None else previous.block_end + 1
    if start > LONG_MAX - block_size + 1:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "all producer ids are exhausted")
    return ProducerIdBlock(broker_id, start, start + block_size - 1)


def read_block(path: Path) -> ProducerIdBlock | None:
    """The last block recorded at `path`, None when there is no file yet."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if data["version"] != BLOCK_VERSION:
            raise ValueError(f"unknown version {data['version']}")
        block = ProducerIdBlock(int(data["broker"]), int(data["block_start"]), int(data["block_end"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"unreadable {path}: {exc}") from exc
    return _checked(block, str(path))


def _checked(block: ProducerIdBlock, where: str) -> ProducerIdBlock:
    if not 0 <= block.block_start <= block.block_end:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{where} holds an impossible block {block}")
    return block
