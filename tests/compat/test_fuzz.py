"""Protocol fuzzing against a live broker process.

Hypothesis sends random bytes and mutated valid frames (bit flips, truncations, length lies, spliced
garbage) of ApiVersions v0, Metadata v4, Produce v3 and Fetch v4, and Produce requests whose record
batch is bit-flipped then re-checksummed, each on a fresh connection that the client half-closes
afterwards. A second run sends the admin APIs (CreateTopics v1, DeleteTopics v1, CreatePartitions
v1, DescribeConfigs v1, AlterConfigs v1, IncrementalAlterConfigs v0, Metadata v4 with auto-creation)
with array counts that lie (up to 2**31-1 elements announced in a few bytes), long real arrays (up
to 20,000 names) and partition counts up to 1000 (real creations stay at 50 partitions or fewer on
three topic names, larger ones are validate_only), some of them truncated or spliced; after each
one a connection opened before the run must still get ApiVersions answered. Whatever the broker
answers per frame (a response, an error code or a closed connection) is Kafka's choice to make;
what must hold is invariant 6 of the design: the process stays up, a new connection still gets
ApiVersions answered, and the data acknowledged before the fuzzing reads back byte for byte.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers, wire

CANARY_TOPIC = "fuzz-canary-acknowledged-data"
ADMIN_CANARY_TOPIC = "fuzz-canary-admin-data"  # as long as the other: no mutation reaches it
FUZZ_TOPIC = "fz"  # a different length from the canary, so no single mutation can retarget it
EXAMPLES = 300
ADMIN_EXAMPLES = 200


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("fuzz-broker")
    process = BrokerProcess(root / "data", output_path=root / "broker.out")
    process.start()
    try:
        yield process
    finally:
        process.kill()


def valid_frames() -> list[bytes]:
    batch = wire.record_batch([(b"key", b"value"), (None, b"\x00" * 40)])
    return [
        wire.request_frame(wire.API_API_VERSIONS, 0, 1, b""),
        wire.request_frame(wire.API_METADATA, 4, 2, wire.metadata_v4_body([FUZZ_TOPIC, CANARY_TOPIC], False)),
        wire.request_frame(wire.API_METADATA, 4, 3, wire.metadata_v4_body(None, False)),
        wire.request_frame(wire.API_PRODUCE, 3, 4, wire.produce_v3_body(FUZZ_TOPIC, 0, batch, 1)),
        wire.request_frame(wire.API_FETCH, 4, 5, wire.fetch_v4_body(FUZZ_TOPIC, 0, 0, 1 << 16, 0)),
    ]


@st.composite
def mutated_frame(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(valid_frames())))
    kind = draw(st.sampled_from(["flip", "truncate", "length", "splice"]))
    if kind == "flip":
        for position in draw(st.lists(st.integers(0, len(frame) * 8 - 1), min_size=1, max_size=8)):
            frame[position // 8] ^= 1 << (position % 8)
    elif kind == "truncate":
        frame = frame[: draw(st.integers(0, len(frame) - 1))]
    elif kind == "length":
        frame[:4] = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1)))
    else:
        at = draw(st.integers(4, len(frame)))
        frame[at:at] = draw(st.binary(min_size=1, max_size=64))
    return bytes(frame)


@st.composite
def produce_with_mutated_batch(draw: st.DrawFn) -> bytes:
    """A well-formed Produce whose batch is mutated after the CRC field and then re-checksummed,
    so the mutation reaches record validation instead of stopping at the CRC check."""
    batch = bytearray(wire.record_batch([(b"key", b"value"), (None, b"\x00" * 40), (b"k", None)]))
    for position in draw(st.lists(st.integers(21 * 8, len(batch) * 8 - 1), min_size=1, max_size=6)):
        batch[position // 8] ^= 1 << (position % 8)
    body = wire.produce_v3_body(FUZZ_TOPIC, 0, wire.with_valid_crc(bytes(batch)), 1)
    return wire.request_frame(wire.API_PRODUCE, 3, 6, body)


fuzz_input = st.one_of(
    mutated_frame(),
    produce_with_mutated_batch(),
    st.binary(max_size=256),
    st.lists(mutated_frame(), min_size=2, max_size=4).map(b"".join),
)


# --- admin frames, hand-packed (non-flexible versions) -------------------------------------------

API_CREATE_TOPICS, API_DELETE_TOPICS, API_DESCRIBE_CONFIGS, API_ALTER_CONFIGS = 19, 20, 32, 33
API_CREATE_PARTITIONS, API_INCREMENTAL_ALTER_CONFIGS = 37, 44
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
ADMIN_TOPICS = ["fz-a", "fz-b", "fz-c"]  # the only names admin requests may really create or delete
CONFIG_NAMES = ["cleanup.policy", "retention.ms", "max.message.bytes", "segment.bytes", "x.unknown", ""]
LYING_COUNTS = [2**31 - 1, 1 << 24, 1 << 20, 70_000, -2]


def _s(text: str | None) -> bytes:
    return wire._string(text)


def _i32(value: int) -> bytes:
    return struct.pack(">i", value)


@st.composite
def admin_array(draw: st.DrawFn, items: list[bytes]) -> bytes:
    """An int32 count and `items`; one time in eight the count lies (huge, or negative)."""
    count = draw(st.sampled_from(LYING_COUNTS)) if draw(st.integers(0, 7)) == 0 else len(items)
    return _i32(count) + b"".join(items)


@st.composite
def many_names(draw: st.DrawFn, max_size: int = 8) -> list[str]:
    """A few names, or a long run of distinct ones (up to 20,000) that name no topic."""
    if draw(st.integers(0, 4)) == 0:
        return [f"fz-none-{i}" for i in range(draw(st.integers(1000, 20_000)))]
    other = st.text("abcxyz-._", min_size=0, max_size=12)
    return draw(st.lists(st.one_of(st.sampled_from(ADMIN_TOPICS), other), max_size=max_size))


@st.composite
def create_topics_v1(draw: st.DrawFn) -> bytes:
    topics = []
    for name in draw(st.lists(st.sampled_from(ADMIN_TOPICS), min_size=1, max_size=3)):
        validate_only = draw(st.booleans())
        partitions = draw(st.integers(-5, 1000 if validate_only else 50))
        replicas = [_i32(draw(st.integers(-1, 2))) for _ in range(draw(st.integers(0, 3)))]
        assignments = [_i32(index) + draw(admin_array(replicas)) for index in range(draw(st.integers(0, 4)))]
        configs = [_s(draw(st.sampled_from(CONFIG_NAMES))) + _s(draw(st.sampled_from(["1", "x", None])))]
        topics.append(
            _s(name) + _i32(partitions) + struct.pack(">h", draw(st.integers(-2, 3)))
            + draw(admin_array(assignments)) + draw(admin_array(configs))
        )  # fmt: skip
    return draw(admin_array(topics)) + _i32(5000) + struct.pack(">?", validate_only)


@st.composite
def delete_topics_v1(draw: st.DrawFn) -> bytes:
    return draw(admin_array([_s(name) for name in draw(many_names())])) + _i32(5000)


@st.composite
def create_partitions_v1(draw: st.DrawFn) -> bytes:
    topics = []
    validate_only = draw(st.booleans())
    for name in draw(st.lists(st.sampled_from(ADMIN_TOPICS), min_size=1, max_size=3)):
        count = draw(st.integers(-1, 1000 if validate_only else 50))
        brokers = [_i32(draw(st.integers(-1, 1))) for _ in range(draw(st.integers(0, 2)))]
        assignments = [draw(admin_array(brokers)) for _ in range(draw(st.integers(0, 3)))]
        assignment = _i32(-1) if draw(st.booleans()) else draw(admin_array(assignments))
        topics.append(_s(name) + _i32(count) + assignment)
    return draw(admin_array(topics)) + _i32(5000) + struct.pack(">?", validate_only)


@st.composite
def resource(draw: st.DrawFn) -> tuple[int, str]:
    """A topic resource (admin names or many others), or the broker (only ever validated)."""
    if draw(st.integers(0, 3)) == 0:
        return BROKER_RESOURCE, draw(st.sampled_from(["0", "", "7"]))
    return TOPIC_RESOURCE, draw(st.one_of(st.sampled_from(ADMIN_TOPICS), st.text("abc", max_size=6)))


@st.composite
def describe_configs_v1(draw: st.DrawFn) -> bytes:
    resources = []
    for kind, name in draw(st.lists(resource(), min_size=1, max_size=4)):
        keys = _i32(-1) if draw(st.booleans()) else draw(admin_array([_s(k) for k in draw(many_names())]))
        resources.append(struct.pack(">b", kind) + _s(name) + keys)
    if draw(st.integers(0, 4)) == 0:  # thousands of resources naming no topic
        resources += [struct.pack(">b", TOPIC_RESOURCE) + _s(f"fz-none-{i}") + _i32(-1) for i in range(5000)]
    return draw(admin_array(resources)) + struct.pack(">?", draw(st.booleans()))


@st.composite
def alter_configs(draw: st.DrawFn, incremental: bool) -> bytes:
    """AlterConfigs v1, or IncrementalAlterConfigs v0 (which adds an operation to each entry)."""
    resources, validate_only = [], draw(st.booleans())
    for kind, name in draw(st.lists(resource(), min_size=1, max_size=3)):
        validate_only = validate_only or kind == BROKER_RESOURCE
        entries = [
            _s(draw(st.sampled_from(CONFIG_NAMES)))
            + (struct.pack(">b", draw(st.integers(-1, 4))) if incremental else b"")
            + _s(draw(st.sampled_from(["86400000", "compact", "-5", "x", None])))
            for _ in range(draw(st.integers(0, 4)))
        ]
        resources.append(struct.pack(">b", kind) + _s(name) + draw(admin_array(entries)))
    return draw(admin_array(resources)) + struct.pack(">?", validate_only)


@st.composite
def metadata_v4(draw: st.DrawFn) -> bytes:
    """Many names without auto-creation, or up to three admin names with it."""
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(ADMIN_TOPICS), max_size=3))
        return draw(admin_array([_s(n) for n in names])) + struct.pack(">?", True)
    return draw(admin_array([_s(n) for n in draw(many_names(max_size=30))])) + struct.pack(">?", False)


@st.composite
def admin_frame(draw: st.DrawFn) -> bytes:
    api_key, version, body = draw(
        st.one_of(
            create_topics_v1().map(lambda b: (API_CREATE_TOPICS, 1, b)),
            delete_topics_v1().map(lambda b: (API_DELETE_TOPICS, 1, b)),
            create_partitions_v1().map(lambda b: (API_CREATE_PARTITIONS, 1, b)),
            describe_configs_v1().map(lambda b: (API_DESCRIBE_CONFIGS, 1, b)),
            alter_configs(incremental=False).map(lambda b: (API_ALTER_CONFIGS, 1, b)),
            alter_configs(incremental=True).map(lambda b: (API_INCREMENTAL_ALTER_CONFIGS, 0, b)),
            metadata_v4().map(lambda b: (wire.API_METADATA, 4, b)),
        )
    )
    frame = wire.request_frame(api_key, version, 7, body)
    cut = draw(st.integers(0, 4))
    if cut == 0:  # truncated, the size prefix still claiming the whole frame
        return frame[: draw(st.integers(4, len(frame) - 1))]
    if cut == 1:  # garbage spliced into the body, the size prefix fixed to match
        at = draw(st.integers(4 + 10, len(frame)))
        body_bytes = frame[4:at] + draw(st.binary(min_size=1, max_size=16)) + frame[at:]
        return struct.pack(">i", len(body_bytes)) + body_bytes
    return frame


def send_and_drain(bootstrap: str, data: bytes) -> None:
    """Send, half-close, then read until the broker closes (or a short timeout)."""
    sock = wire.connect(bootstrap, timeout=2.0)
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass
    except OSError:  # reset, broken pipe, not connected, timeout: all fine answers to garbage
        pass
    finally:
        sock.close()


@pytest.mark.slow
def test_broker_survives_fuzzing(fuzz_broker: BrokerProcess) -> None:
    helpers.create_topic(fuzz_broker.bootstrap, CANARY_TOPIC)
    helpers.create_topic(fuzz_broker.bootstrap, FUZZ_TOPIC)
    with wire.Connection(fuzz_broker.bootstrap) as conn:
        batch = wire.record_batch([(b"k%d" % i, bytes([i]) * i) for i in range(20)])
        assert conn.produce(CANARY_TOPIC, 0, batch).error_code == 0
        before = conn.read_all(CANARY_TOPIC)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fuzz_input)
    def fuzz(data: bytes) -> None:
        send_and_drain(fuzz_broker.bootstrap, data)
        assert fuzz_broker.is_running(), f"broker died on {data!r}:\n{fuzz_broker.output_tail()}"

    fuzz()

    assert fuzz_broker.is_running()
    with wire.Connection(fuzz_broker.bootstrap) as conn:
        assert conn.api_versions().error_code == 0
        assert conn.read_all(CANARY_TOPIC) == before
    assert [r.offset for r in before] == list(range(20))


@pytest.mark.slow
def test_broker_survives_admin_fuzzing(fuzz_broker: BrokerProcess) -> None:
    """Admin requests with lying array counts, long arrays and large partition counts: the broker
    stays up and keeps answering a connection opened before them."""
    helpers.create_topic(fuzz_broker.bootstrap, ADMIN_CANARY_TOPIC)
    with wire.Connection(fuzz_broker.bootstrap) as conn:
        conn.produce(ADMIN_CANARY_TOPIC, 0, wire.record_batch([(b"admin", b"fuzz")]))
        before = conn.read_all(ADMIN_CANARY_TOPIC)
    bystander = wire.Connection(fuzz_broker.bootstrap, timeout=30)

    @settings(
        max_examples=ADMIN_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(admin_frame())
    def fuzz(data: bytes) -> None:
        send_and_drain(fuzz_broker.bootstrap, data)
        assert fuzz_broker.is_running(), f"broker died on {data[:200]!r}:\n{fuzz_broker.output_tail()}"
        assert bystander.api_versions().error_code == 0

    try:
        fuzz()
    finally:
        bystander.close()

    with wire.Connection(fuzz_broker.bootstrap) as conn:
        assert conn.api_versions().error_code == 0
        assert conn.read_all(ADMIN_CANARY_TOPIC) == before
