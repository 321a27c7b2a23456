"""A minimal, independent Kafka wire client for the bad-input, fuzz and crash tests.

Owns hand-packed request frames and response parsers for the few non-flexible versions the tests use
(the oldest versions Kafka 4.0 still serves for RecordBatch v2): ApiVersions v0, Metadata v4,
Produce v3, Fetch v4, ListOffsets v1. It deliberately shares no code with odradek.protocol: it is the
oracle the broker's codec is checked against, written from Kafka's protocol guide.

Invariants: every frame is `int32 size` + request header v1 (api_key, api_version, correlation_id,
client_id) + body; responses are matched by correlation id. `RecordBatch v2` is built and parsed
uncompressed only, with a correct CRC32C unless a test corrupts it on purpose.

Callers: tests/compat only.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

import crc32c

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_API_VERSIONS = 18

# Errors a Kafka client retries after refreshing metadata: a broker that restarted opens its port
# before every partition is loaded, and answers NOT_LEADER_OR_FOLLOWER for those still loading.
RETRIABLE_FETCH_ERRORS = frozenset({3, 5, 6})  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER
RETRY_WINDOW_S = 15.0

CLIENT_ID = "odradek-compat"


class ConnectionClosed(Exception):
    """The broker closed the connection before a whole response frame arrived."""


# --- primitive encoders -------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + value


def _array(items: list[bytes] | None) -> bytes:
    if items is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(items)) + b"".join(items)


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _varint_bytes(value: bytes | None) -> bytes:
    return _varint(-1) if value is None else _varint(len(value)) + value


# --- primitive decoder --------------------------------------------------------------------------


class Reader:
    """Sequential big-endian reader over one response body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw.decode()

    def bytes(self) -> bytes | None:
        size = self.int32()
        if size < 0:
            return None
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def varint_bytes(self) -> bytes | None:
        size = self.varint()
        if size < 0:
            return None
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw

    def array_len(self) -> int:
        return self.int32()


# --- framing ------------------------------------------------------------------------------------


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole request: size prefix, request header v1, body."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + _string(CLIENT_ID)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionClosed(f"closed after {len(chunks)} of {size} bytes")
        chunks += chunk
    return bytes(chunks)


def recv_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response frame as (correlation_id, body) with response header v0."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    payload = recv_exactly(sock, size)
    (correlation_id,) = struct.unpack_from(">i", payload)
    return correlation_id, payload[4:]


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def is_closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within `timeout`, reading any data."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return True


class Connection:
    """A blocking connection that sends one request at a time and checks correlation ids."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.sock = connect(bootstrap, timeout)
        self._next_correlation_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, api_key: int, api_version: int, body: bytes) -> bytes:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.sock.sendall(request_frame(api_key, api_version, correlation_id, body))
        got, response = recv_response(self.sock)
        if got != correlation_id:
            raise AssertionError(f"correlation id {got} answers request {correlation_id}")
        return response

    def api_versions(self) -> ApiVersionsResult:
        return parse_api_versions_v0(self.call(API_API_VERSIONS, 0, b""))

    def metadata(self, topics: list[str] | None, allow_auto_create: bool = False) -> MetadataResult:
        return parse_metadata_v4(self.call(API_METADATA, 4, metadata_v4_body(topics, allow_auto_create)))

    def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1) -> PartitionProduceResult:
        body = produce_v3_body(topic, partition, batch, acks)
        return parse_produce_v3(self.call(API_PRODUCE, 3, body))

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, max_wait_ms: int = 50
    ) -> PartitionFetchResult:
        body = fetch_v4_body(topic, partition, offset, max_bytes, max_wait_ms)
        return parse_fetch_v4(self.call(API_FETCH, 4, body))

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """(error_code, offset) for a timestamp, or -1 = latest, -2 = earliest."""
        body = list_offsets_v1_body(topic, partition, timestamp)
        return parse_list_offsets_v1(self.call(API_LIST_OFFSETS, 1, body))

    def read_all(self, topic: str, partition: int = 0, start: int = 0) -> list[Record]:
        """Every record from `start` to the high watermark."""
        records: list[Record] = []
        offset = start
        deadline = time.monotonic() + RETRY_WINDOW_S
        while True:
            result = self.fetch(topic, partition, offset)
            if result.error_code in RETRIABLE_FETCH_ERRORS and time.monotonic() < deadline:
                time.sleep(0.05)  # as a client does: a partition still loading after a restart
                continue
            if result.error_code != 0:
                raise AssertionError(f"fetch {topic}-{partition}@{offset} failed with {result.error_code}")
            fresh = [r for r in parse_record_batches(result.records) if r.offset >= offset]
            records += fresh
            if not fresh:
                return records
            offset = fresh[-1].offset + 1
            if offset >= result.high_watermark:
                return records


# --- ApiVersions v0 -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionsResult:
    error_code: int
    ranges: dict[int, tuple[int, int]]


def parse_api_versions_v0(body: bytes) -> ApiVersionsResult:
    r = Reader(body)
    error_code = r.int16()
    ranges = {}
    for _ in range(r.array_len()):
        key, low, high = r.int16(), r.int16(), r.int16()
        ranges[key] = (low, high)
    return ApiVersionsResult(error_code, ranges)


# --- Metadata v4 --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    error_code: int
    name: str
    partitions: dict[int, tuple[int, int]]  # partition index -> (error_code, leader_id)


@dataclass(frozen=True, slots=True)
class MetadataResult:
    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, TopicMetadata]


def metadata_v4_body(topics: list[str] | None, allow_auto_create: bool) -> bytes:
    names = None if topics is None else [_string(t) for t in topics]
    return _array(names) + struct.pack(">?", allow_auto_create)


def parse_metadata_v4(body: bytes) -> MetadataResult:
    r = Reader(body)
    r.int32()  # throttle_time_ms
    brokers = {}
    for _ in range(r.array_len()):
        node_id, host, port = r.int32(), r.string(), r.int32()
        r.string()  # rack
        brokers[node_id] = (host, port)
    r.string()  # cluster_id
    controller_id = r.int32()
    topics = {}
    for _ in range(r.array_len()):
        error_code, name = r.int16(), r.string()
        r.int8()  # is_internal
        partitions = {}
        for _ in range(r.array_len()):
            p_error, index, leader = r.int16(), r.int32(), r.int32()
            for _ in range(2):  # replica_nodes, isr_nodes
                for _ in range(r.array_len()):
                    r.int32()
            partitions[index] = (p_error, leader)
        topics[name] = TopicMetadata(error_code, name, partitions)
    return MetadataResult(brokers, controller_id, topics)


# --- Produce v3 ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionProduceResult:
    error_code: int
    base_offset: int
    log_append_time_ms: int


def produce_v3_body(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int = 10_000) -> bytes:
    partition_data = struct.pack(">i", partition) + _bytes(batch)
    topic_data = _string(topic) + _array([partition_data])
    return _string(None) + struct.pack(">hi", acks, timeout_ms) + _array([topic_data])


def parse_produce_v3(body: bytes) -> PartitionProduceResult:
    r = Reader(body)
    results = []
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            r.int32()
            results.append(PartitionProduceResult(r.int16(), r.int64(), r.int64()))
    assert len(results) == 1, f"expected one partition response, got {results}"
    return results[0]


# --- Fetch v4 -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionFetchResult:
    error_code: int
    high_watermark: int
    records: bytes


def fetch_v4_body(topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int) -> bytes:
    partition_data = struct.pack(">iqi", partition, offset, max_bytes)
    topic_data = _string(topic) + _array([partition_data])
    head = struct.pack(">iiiib", -1, max_wait_ms, 1 if max_wait_ms else 0, max_bytes, 0)
    return head + _array([topic_data])


def parse_fetch_v4(body: bytes) -> PartitionFetchResult:
    r = Reader(body)
    r.int32()  # throttle_time_ms
    results = []
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            r.int32()
            error_code, high_watermark = r.int16(), r.int64()
            r.int64()  # last_stable_offset
            for _ in range(max(r.array_len(), 0)):  # aborted_transactions (nullable)
                r.int64(), r.int64()
            results.append(PartitionFetchResult(error_code, high_watermark, r.bytes() or b""))
    assert len(results) == 1, f"expected one partition response, got {results}"
    return results[0]


# --- ListOffsets v1 -----------------------------------------------------------------------------


def list_offsets_v1_body(topic: str, partition: int, timestamp: int) -> bytes:
    topic_data = _string(topic) + _array([struct.pack(">iq", partition, timestamp)])
    return struct.pack(">i", -1) + _array([topic_data])


def parse_list_offsets_v1(body: bytes) -> tuple[int, int]:
    r = Reader(body)
    results = []
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            r.int32()
            error_code = r.int16()
            r.int64()  # timestamp
            results.append((error_code, r.int64()))
    assert len(results) == 1, f"expected one partition response, got {results}"
    return results[0]


# --- RecordBatch v2 -----------------------------------------------------------------------------

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = _BATCH_HEADER.size  # 61 bytes before the first record
_CRC_OFFSET = 17  # base offset (8) + batch length (4) + partition leader epoch (4) + magic (1)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + _varint(timestamp_delta) + _varint(offset_delta)
    body += _varint_bytes(key) + _varint_bytes(value) + _varint(0)
    return _varint(len(body)) + body


def record_batch(
    records: list[tuple[bytes | None, bytes | None]], timestamp: int = 1_700_000_000_000, base_offset: int = 0
) -> bytes:
    """An uncompressed RecordBatch v2 (no producer id) holding (key, value) pairs."""
    body = b"".join(_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    return raw_batch(body, len(records), timestamp=timestamp, base_offset=base_offset)


def raw_batch(
    body: bytes, count: int, attributes: int = 0, timestamp: int = 1_700_000_000_000, base_offset: int = 0
) -> bytes:
    """A RecordBatch v2 around `body` with a correct CRC32C, whatever `body`, `count` and
    `attributes` claim (tests use it to build well-checksummed lies)."""
    batch_length = BATCH_OVERHEAD - 12 + len(body)
    header = _BATCH_HEADER.pack(
        base_offset, batch_length, -1, 2, 0, attributes, count - 1, timestamp, timestamp, -1, -1, -1, count
    )
    unsigned = header + body
    crc = crc32c.crc32c(unsigned[_CRC_OFFSET + 4 :])
    return unsigned[:_CRC_OFFSET] + struct.pack(">I", crc) + unsigned[_CRC_OFFSET + 4 :]


def with_valid_crc(batch: bytes) -> bytes:
    """`batch` with its CRC32C recomputed over whatever its bytes now are."""
    crc = crc32c.crc32c(batch[_CRC_OFFSET + 4 :])
    return batch[:_CRC_OFFSET] + struct.pack(">I", crc) + batch[_CRC_OFFSET + 4 :]


def corrupt_crc(batch: bytes) -> bytes:
    """The same batch with one bit of its CRC flipped."""
    mutable = bytearray(batch)
    mutable[_CRC_OFFSET] ^= 0x01
    return bytes(mutable)


def parse_record_batches(data: bytes) -> list[Record]:
    """Records of every whole uncompressed batch in `data` (a trailing partial batch is ignored)."""
    records: list[Record] = []
    pos = 0
    while pos + BATCH_OVERHEAD <= len(data):
        fields = _BATCH_HEADER.unpack_from(data, pos)
        base_offset, batch_length, _, magic, crc, attributes = fields[:6]
        base_timestamp, count = fields[7], fields[12]
        end = pos + 12 + batch_length
        if end > len(data):
            break
        if magic != 2:
            raise AssertionError(f"batch at {base_offset} has magic {magic}")
        if crc32c.crc32c(data[pos + _CRC_OFFSET + 4 : end]) != crc:
            raise AssertionError(f"batch at {base_offset} fails its CRC32C")
        if attributes & 0x07:
            raise AssertionError(f"batch at {base_offset} is compressed; only plain batches are parsed")
        if not attributes & 0x20:  # control batches (transaction markers) carry no data records
            body = Reader(data[pos + BATCH_OVERHEAD : end])
            records += _parse_records(body, base_offset, base_timestamp, count)
        pos = end
    return records


def _parse_records(r: Reader, base_offset: int, base_timestamp: int, count: int) -> list[Record]:
    records = []
    for _ in range(count):
        r.varint()  # length
        r.int8()  # attributes
        timestamp = base_timestamp + r.varint()
        offset = base_offset + r.varint()
        key, value = r.varint_bytes(), r.varint_bytes()
        headers = []
        for _ in range(r.varint()):
            name = r.varint_bytes() or b""
            headers.append((name.decode(), r.varint_bytes()))
        records.append(Record(offset, timestamp, key, value, tuple(headers)))
    return records


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    attributes: int
    record_count: int

    @property
    def compression(self) -> int:
        """Kafka's codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & 0x07


def batch_headers(data: bytes) -> list[BatchHeader]:
    """Headers of every whole batch in `data`, compressed or not."""
    headers = []
    pos = 0
    while pos + BATCH_OVERHEAD <= len(data):
        fields = _BATCH_HEADER.unpack_from(data, pos)
        end = pos + 12 + fields[1]
        if end > len(data):
            break
        headers.append(BatchHeader(fields[0], fields[5], fields[12]))
        pos = end
    return headers
