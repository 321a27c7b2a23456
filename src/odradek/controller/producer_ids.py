"""Producer id allocation: blocks of ids reserved through a durable high-water mark.

Kafka's ZooKeeper-mode ProducerIdManager reserves blocks of 1000 producer ids by a conditional write
of the `/latest_producer_id_block` znode and hands them out one by one. Single-node odradek keeps
that znode's content in a file of the first log dir instead, `producer-id-block`:

    {"version": 1, "broker": 0, "block_start": "1000", "block_end": "1999"}

the last block reserved (both ends inclusive, as in Kafka; ids as strings, as in Kafka's JSON).

Invariants:
- A block is recorded durably (temp file, fsync, rename, fsync of the directory) before any id of
  it is handed out, so no id is ever handed out twice, across restarts included; the unused rest
  of a block is skipped after a restart, as in Kafka.
- A file that does not parse is never guessed over: allocation fails with UNKNOWN_SERVER_ERROR
  until it is repaired, since starting again from 0 would reuse ids.
- Ids run from 0 to 2**63 - 1; when they are exhausted allocation fails (UNKNOWN_SERVER_ERROR), as
  Kafka's does.
Thread-safe (one lock); a new block costs one fsync per `block_size` ids.

Deliberate deviation: the high-water mark is local to the broker's log dir, so ids are unique per
broker, not across a multi-broker cluster (Kafka's znode is cluster-wide).

Callers: the InitProducerId handler.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from odradek.durable_file import write_atomically
from odradek.protocol.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK_FILE = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000
BLOCK_VERSION = 1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A reserved range of producer ids, both ends inclusive."""

    broker_id: int
    block_start: int
    block_end: int


class ProducerIdManager:
    """Hands out producer ids from blocks recorded in `<log_dir>/producer-id-block`."""

    def __init__(self, log_dir: str | Path, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.path = Path(log_dir) / PRODUCER_ID_BLOCK_FILE
        self.broker_id = broker_id
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next_id = 0
        self._block_end = -1  # nothing reserved yet

    def generate_producer_id(self) -> int:
        """A producer id never handed out before; raises KafkaError(UNKNOWN_SERVER_ERROR) when the
        block file is unreadable or the ids are exhausted."""
        with self._lock:
            if self._next_id > self._block_end:
                block = self._reserve_block()
                self._next_id, self._block_end = block.block_start, block.block_end
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    def _reserve_block(self) -> ProducerIdBlock:
        previous = read_block(self.path)
        start = 0 if previous is None else previous.block_end + 1
        if start > LONG_MAX - self.block_size + 1:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "all producer ids are exhausted")
        block = ProducerIdBlock(self.broker_id, start, start + self.block_size - 1)
        try:
            write_atomically(self.path, _encode(block))
        except OSError as exc:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot record {self.path}: {exc}") from exc
        return block


def read_block(path: Path) -> ProducerIdBlock | None:
    """The last reserved block recorded at `path`, None when there is no file yet."""
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
    if not 0 <= block.block_start <= block.block_end:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{path} holds an impossible block {block}")
    return block


def _encode(block: ProducerIdBlock) -> bytes:
    return json.dumps(
        {
            "version": BLOCK_VERSION,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    ).encode()
