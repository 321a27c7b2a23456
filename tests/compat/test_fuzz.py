"""Protocol fuzzing against a live broker process.

Hypothesis sends random bytes and mutated valid frames (bit flips, truncations, length lies, spliced
garbage) of ApiVersions v0, Metadata v4, Produce v3 and Fetch v4, and Produce requests whose record
batch is bit-flipped then re-checksummed, each on a fresh connection that the client half-closes
afterwards. Whatever the broker answers per frame (a response, an error code or a
closed connection) is Kafka's choice to make; what must hold is invariant 6 of the design: the process
stays up, a new connection still gets ApiVersions answered, and the data acknowledged before the
fuzzing reads back byte for byte.
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
FUZZ_TOPIC = "fz"  # a different length from the canary, so no single mutation can retarget it
EXAMPLES = 300


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
