"""Bad input against a real broker process over raw sockets (hand-packed frames, see wire.py).

Apache Kafka's behaviour is the oracle: framing violations (oversized or negative size, unknown API
key, unsupported version of a non-ApiVersions API) close the connection; an unsupported ApiVersions
version is answered in v0 with UNSUPPORTED_VERSION and the supported ranges; bad produce requests get
their error code (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION) and append nothing;
a fetch outside the log gets OFFSET_OUT_OF_RANGE; a bad config value stops the process at start with
a non-zero exit and a message naming the key. After every bad input the broker serves a new
connection and the data acknowledged before it reads back unchanged.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass

import pytest

from odradek.testing.broker import BrokerStartError
from tests.compat import helpers, wire

CORRUPT_MESSAGE = 2
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_REQUIRED_ACKS = 21
INVALID_RECORD = 87
SOCKET_REQUEST_MAX_BYTES = 104_857_600  # Kafka's default socket.request.max.bytes


@dataclass(frozen=True, slots=True)
class Canary:
    """A topic with acknowledged data that every bad input must leave untouched."""

    topic: str
    records: tuple[wire.Record, ...]


@pytest.fixture(scope="module")
def canary(broker) -> Canary:
    topic = f"bad-input-canary-{id(broker):x}"
    helpers.create_topic(broker.bootstrap, topic, config={"max.message.bytes": "4096"})
    with wire.Connection(broker.bootstrap) as conn:
        for n in range(3):
            batch = wire.record_batch([(b"k%d" % n, b"acknowledged-%d" % n), (None, bytes(range(n * 50)))])
            assert conn.produce(topic, 0, batch).error_code == 0
        records = conn.read_all(topic)
    assert len(records) == 6
    return Canary(topic, tuple(records))


def assert_healthy(bootstrap: str, canary: Canary) -> None:
    """A new connection gets ApiVersions answered and the canary's data back unchanged."""
    with wire.Connection(bootstrap) as conn:
        versions = conn.api_versions()
        assert versions.error_code == 0 and wire.API_PRODUCE in versions.ranges
        assert tuple(conn.read_all(canary.topic)) == canary.records


def send_raw(bootstrap: str, data: bytes) -> bool:
    """Send `data` on a new connection and report whether the broker then closed it."""
    sock = wire.connect(bootstrap)
    try:
        sock.sendall(data)
        return wire.is_closed_by_peer(sock)
    finally:
        sock.close()


def test_truncated_frame_then_client_close(broker, canary: Canary) -> None:
    frame = wire.request_frame(wire.API_METADATA, 4, 1, wire.metadata_v4_body(None, False))
    sock = wire.connect(broker.bootstrap)
    sock.sendall(frame[: len(frame) // 2])
    sock.close()

    assert_healthy(broker.bootstrap, canary)


def test_size_above_socket_request_max_bytes_closes(broker, canary: Canary) -> None:
    header = struct.pack(">ihhi", SOCKET_REQUEST_MAX_BYTES + 1, wire.API_API_VERSIONS, 0, 1)

    assert send_raw(broker.bootstrap, header)
    assert_healthy(broker.bootstrap, canary)


def test_negative_size_closes(broker, canary: Canary) -> None:
    assert send_raw(broker.bootstrap, struct.pack(">i", -8) + b"\x00" * 8)
    assert_healthy(broker.bootstrap, canary)


def test_frame_too_short_for_a_header_closes(broker, canary: Canary) -> None:
    assert send_raw(broker.bootstrap, struct.pack(">i", 3) + b"\x00\x12\x00")
    assert_healthy(broker.bootstrap, canary)


def test_unknown_api_key_closes(broker, canary: Canary) -> None:
    assert send_raw(broker.bootstrap, wire.request_frame(12345, 0, 1, b""))
    assert_healthy(broker.bootstrap, canary)


def test_unsupported_metadata_version_closes(broker, canary: Canary) -> None:
    assert send_raw(broker.bootstrap, wire.request_frame(wire.API_METADATA, 999, 1, b"\x00" * 8))
    assert_healthy(broker.bootstrap, canary)


def test_unsupported_api_versions_version_answers_v0_error(broker, canary: Canary) -> None:
    sock = wire.connect(broker.bootstrap)
    try:
        sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 999, 77, b"\x00" * 4))
        correlation_id, body = wire.recv_response(sock)
    finally:
        sock.close()

    result = wire.parse_api_versions_v0(body)
    assert correlation_id == 77
    assert result.error_code == UNSUPPORTED_VERSION
    assert result.ranges[wire.API_API_VERSIONS][0] == 0  # the ranges tell the client what to retry with
    assert_healthy(broker.bootstrap, canary)


def test_garbage_body_of_known_api_closes(broker, canary: Canary) -> None:
    assert send_raw(broker.bootstrap, wire.request_frame(wire.API_PRODUCE, 3, 1, b"\xff" * 5))
    assert_healthy(broker.bootstrap, canary)


def test_pipelined_and_dribbled_requests_are_answered_in_order(broker, canary: Canary) -> None:
    frames = b"".join(
        wire.request_frame(api, version, correlation_id, body)
        for api, version, correlation_id, body in [
            (wire.API_API_VERSIONS, 0, 7, b""),
            (wire.API_METADATA, 4, 8, wire.metadata_v4_body([canary.topic], False)),
            (wire.API_API_VERSIONS, 0, 9, b""),
        ]
    )
    sock = wire.connect(broker.bootstrap)
    try:
        sock.sendall(frames[:5])
        for i in range(5, len(frames)):  # one byte per segment
            sock.sendall(frames[i : i + 1])
        answers = [wire.recv_response(sock) for _ in range(3)]
    finally:
        sock.close()

    assert [correlation_id for correlation_id, _ in answers] == [7, 8, 9]
    assert canary.topic in wire.parse_metadata_v4(answers[1][1]).topics


def test_corrupt_crc_is_corrupt_message_and_appends_nothing(broker, canary: Canary) -> None:
    bad = wire.corrupt_crc(wire.record_batch([(b"evil", b"must never be stored")]))
    with wire.Connection(broker.bootstrap) as conn:
        result = conn.produce(canary.topic, 0, bad)
        latest = conn.list_offsets(canary.topic, 0, -1)

    assert result.error_code == CORRUPT_MESSAGE
    assert latest == (0, len(canary.records))
    assert_healthy(broker.bootstrap, canary)


def test_batch_larger_than_max_message_bytes_is_message_too_large(broker, canary: Canary) -> None:
    big = wire.record_batch([(b"big", b"x" * 5000)])  # the canary topic has max.message.bytes=4096
    with wire.Connection(broker.bootstrap) as conn:
        result = conn.produce(canary.topic, 0, big)
        latest = conn.list_offsets(canary.topic, 0, -1)

    assert result.error_code == MESSAGE_TOO_LARGE
    assert latest == (0, len(canary.records))
    assert_healthy(broker.bootstrap, canary)


def test_acks_0_produce_gets_no_response(broker, canary: Canary, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    batch = wire.record_batch([(b"fire", b"and forget")])
    sock = wire.connect(broker.bootstrap)
    try:
        sock.sendall(
            wire.request_frame(wire.API_PRODUCE, 3, 40, wire.produce_v3_body(unique_topic, 0, batch, 0))
        )
        sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, 41, b""))
        correlation_id, _ = wire.recv_response(sock)
    finally:
        sock.close()

    assert correlation_id == 41  # the next answer on the connection is the ApiVersions one
    with wire.Connection(broker.bootstrap) as conn:
        assert [(r.offset, r.value) for r in conn.read_all(unique_topic)] == [(0, b"and forget")]
    assert_healthy(broker.bootstrap, canary)


def test_acks_0_produce_that_fails_closes_the_connection(broker, canary: Canary) -> None:
    bad = wire.corrupt_crc(wire.record_batch([(b"evil", b"unanswered")]))
    frame = wire.request_frame(wire.API_PRODUCE, 3, 1, wire.produce_v3_body(canary.topic, 0, bad, 0))

    assert send_raw(broker.bootstrap, frame)
    assert_healthy(broker.bootstrap, canary)


def test_invalid_required_acks(broker, canary: Canary) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        result = conn.produce(canary.topic, 0, wire.record_batch([(b"k", b"v")]), acks=2)

    assert result.error_code == INVALID_REQUIRED_ACKS
    assert_healthy(broker.bootstrap, canary)


def test_client_base_offset_is_replaced_by_the_broker(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    with wire.Connection(broker.bootstrap) as conn:
        first = conn.produce(
            unique_topic, 0, wire.record_batch([(b"a", b"1"), (b"b", b"2")], base_offset=9000)
        )
        second = conn.produce(unique_topic, 0, wire.record_batch([(b"c", b"3")], base_offset=-77))
        records = conn.read_all(unique_topic)

    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, 2)
    assert [(r.offset, r.value) for r in records] == [(0, b"1"), (1, b"2"), (2, b"3")]


LONG_RECORD = wire.record_batch([(None, bytes(2_000_000))])[wire.BATCH_OVERHEAD :]  # one record, 2 MB


@pytest.mark.parametrize(
    ("body", "count", "attributes", "expected"),
    [
        (b"\x1f\x8b not really gzip" * 4, 3, 1, CORRUPT_MESSAGE),  # gzip attribute over garbage, CRC correct
        (b"\x00" * 3, 3, 0, INVALID_RECORD),  # three records announced, three bytes of body
        (b"", 1, 0, INVALID_RECORD),  # one record announced, none there
        (gzip.compress(b"\x00" * 3), 3, 1, INVALID_RECORD),  # the same, compressed: the handler walks it
        (gzip.compress(LONG_RECORD + b"\x00" * 3), 2, 1, INVALID_RECORD),  # past the loop's 1 MiB: a worker's
    ],
    ids=["garbage-gzip", "short-records", "empty-body", "gzip-short-records", "gzip-long-record-in-a-worker"],
)
def test_well_checksummed_malformed_batch_appends_nothing(
    broker, canary: Canary, unique_topic: str, body: bytes, count: int, attributes: int, expected: int
) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)  # its own topic: a failure must not spread
    with wire.Connection(broker.bootstrap) as conn:
        assert conn.produce(unique_topic, 0, wire.record_batch([(b"good", b"before")])).error_code == 0
        result = conn.produce(unique_topic, 0, wire.raw_batch(body, count, attributes))
        latest = conn.list_offsets(unique_topic, 0, -1)

    assert result.error_code == expected
    assert latest == (0, 1)
    assert f"Refused an append to {unique_topic}-0" in broker.output_tail()
    assert_healthy(broker.bootstrap, canary)


def test_keyless_record_to_a_compacted_topic_is_invalid_record(
    broker, canary: Canary, unique_topic: str
) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, config={"cleanup.policy": "compact"})
    with wire.Connection(broker.bootstrap) as conn:
        keyed = conn.produce(unique_topic, 0, wire.record_batch([(b"k", b"kept")]))
        keyless = conn.produce(unique_topic, 0, wire.record_batch([(b"k2", b"v"), (None, b"no key")]))
        gzipped = gzip.compress(wire.record_batch([(None, b"no key")])[wire.BATCH_OVERHEAD :])
        keyless_gzip = conn.produce(unique_topic, 0, wire.raw_batch(gzipped, 1, attributes=1))
        latest = conn.list_offsets(unique_topic, 0, -1)

    assert (keyed.error_code, keyless.error_code, keyless_gzip.error_code) == (
        0,
        INVALID_RECORD,
        INVALID_RECORD,
    )
    assert latest == (0, 1)
    assert f"Refused an append to {unique_topic}-0" in broker.output_tail()
    assert_healthy(broker.bootstrap, canary)


@pytest.mark.parametrize("offset", [10_000, -5], ids=["past-end", "negative"])
def test_fetch_out_of_range(broker, canary: Canary, offset: int) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        result = conn.fetch(canary.topic, 0, offset)

    assert result.error_code == OFFSET_OUT_OF_RANGE
    assert result.records == b""
    assert_healthy(broker.bootstrap, canary)


def test_missing_partition_of_existing_topic(broker, canary: Canary) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        result = conn.produce(canary.topic, 7, wire.record_batch([(b"k", b"v")]))

    assert result.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert_healthy(broker.bootstrap, canary)


def test_produce_to_missing_topic_without_auto_create(make_broker, unique_topic: str) -> None:
    process = make_broker({"auto.create.topics.enable": "false"})
    with wire.Connection(process.bootstrap) as conn:
        produced = conn.produce(unique_topic, 0, wire.record_batch([(b"k", b"v")]))
        metadata = conn.metadata([unique_topic], allow_auto_create=True)
        fetched = conn.fetch(unique_topic, 0, 0)
        listed = conn.metadata(None)

    assert produced.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert metadata.topics[unique_topic].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert fetched.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert unique_topic not in listed.topics


def test_metadata_auto_creates_topic_by_default(broker, unique_topic: str) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        conn.metadata([unique_topic], allow_auto_create=True)
        helpers.wait_for_leaders(broker.bootstrap, unique_topic, 1)  # Kafka's num.partitions default
        produced = conn.produce(unique_topic, 0, wire.record_batch([(b"k", b"v")]))

    assert produced.error_code == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "many"),
        ("log.segment.bytes", "10"),
        ("message.max.bytes", "-1"),
        ("auto.create.topics.enable", "maybe"),
    ],
)
def test_bad_config_value_stops_start_naming_the_key(make_broker, key: str, value: str) -> None:
    process = make_broker({key: value}, start=False)

    with pytest.raises(BrokerStartError):
        process.start(timeout=20)

    assert process.returncode not in (None, 0), process.output_tail()
    assert key in process.output_tail()
