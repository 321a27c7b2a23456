"""Client-side record handling without a broker: range decoding and Kafka's default partitioner."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client import decode_range
from odradek.client.producer import murmur2, partition_for_key
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_java_client(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


def test_partition_for_key_is_positive_modulo() -> None:
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert {partition_for_key(bytes([i]), 3) for i in range(50)} == {0, 1, 2}


def _batch(base: int, values: list[bytes], **kwargs: object) -> bytes:
    records = [
        SimpleRecord(v, key=b"k" + v, headers=(("h", v),), timestamp=1_000 + i) for i, v in enumerate(values)
    ]
    return build_batch(records, base_offset=base, **kwargs)  # type: ignore[arg-type]


def test_decode_range_trims_to_the_range_and_reports_next_offset() -> None:
    data = _batch(10, [b"a", b"b", b"c"]) + _batch(13, [b"d", b"e"], compression=CompressionType.LZ4)
    columns, next_offset = decode_range(data, 11, 14)
    assert columns.offsets == [11, 12, 13]
    assert columns.values == [b"b", b"c", b"d"]
    assert columns.keys == [b"kb", b"kc", b"kd"]
    assert columns.headers == [(("h", b"b"),), (("h", b"c"),), (("h", b"d"),)]
    assert columns.timestamps == [1_001, 1_002, 1_000]
    assert columns.timestamp_types == [0, 0, 0]
    assert next_offset == 15


def test_decode_range_skips_control_batches_but_consumes_their_offsets() -> None:
    marker = build_batch(
        [SimpleRecord(b"\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")], base_offset=2, is_control=True
    )
    data = _batch(0, [b"a", b"b"]) + marker + _batch(3, [b"c"])
    columns, next_offset = decode_range(data, 0, 100)
    assert columns.offsets == [0, 1, 3]
    assert next_offset == 4


def test_decode_range_ignores_a_partial_trailing_batch() -> None:
    whole = _batch(0, [b"a"])
    columns, next_offset = decode_range(whole + _batch(1, [b"b"])[:-3], 0, 10)
    assert (columns.offsets, next_offset) == ([0], 1)
    empty, stuck = decode_range(_batch(5, [b"x"])[:-1], 5, 10)
    assert (empty.offsets, stuck) == ([], 5)


@given(st.integers(0, 30), st.integers(0, 30), st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_decode_range_yields_each_offset_in_range_once(lo: int, span: int, sizes: list[int]) -> None:
    data, base = b"", 0
    for size in sizes:
        data += _batch(base, [b"%d" % (base + i) for i in range(size)])
        base += size
    columns, _ = decode_range(data, lo, lo + span)
    expected = list(range(lo, min(lo + span, base)))
    assert columns.offsets == expected
    assert columns.values == [b"%d" % o for o in expected]
