"""Primitive wire types: known encodings, Reader/Writer round trips, and errors on bad input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import primitives as p
from odradek.protocol.primitives import FileSlice, ProtocolDecodeError, Reader, Writer

QUICK = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")],
)
def test_unsigned_varint_known_encodings(value: int, encoded: str) -> None:
    assert p.unsigned_varint_bytes(value).hex() == encoded
    assert p.read_unsigned_varint(memoryview(bytes.fromhex(encoded)), 0) == (value, len(encoded) // 2)
    assert p.unsigned_varint_size(value) == len(encoded) // 2


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_zigzag_varint_known_encodings(value: int, encoded: str) -> None:
    assert p.varint_bytes(value).hex() == encoded
    assert p.read_varint(bytes.fromhex(encoded), 0)[0] == value
    assert p.varint_size(value) == len(encoded) // 2


@QUICK
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    encoded = p.varlong_bytes(value)
    assert p.read_varlong(encoded, 0) == (value, len(encoded))
    assert p.varlong_size(value) == len(encoded)


def test_varint_longer_than_its_width_is_rejected() -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_unsigned_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(ProtocolDecodeError):
        Reader(b"\x80\x80").unsigned_varint()


def test_strings_known_encodings() -> None:
    w = Writer()
    w.nullable_string("é")
    w.nullable_string(None)
    w.compact_nullable_string("ab")
    w.compact_nullable_string(None)
    w.compact_nullable_string("")
    assert w.getvalue().hex() == "0002c3a9ffff03616200" + "01"
    r = Reader(w.getvalue())
    assert [
        r.string(),
        r.nullable_string(),
        r.compact_string(),
        r.compact_nullable_string(),
        r.compact_string(),
    ] == [
        "é",
        None,
        "ab",
        None,
        "",
    ]
    assert r.remaining == 0


def test_non_nullable_readers_refuse_null() -> None:
    for method, data in [
        ("string", b"\xff\xff"),
        ("compact_string", b"\x00"),
        ("bytes", b"\xff\xff\xff\xff"),
    ]:
        with pytest.raises(ProtocolDecodeError, match="null"):
            getattr(Reader(data), method)()


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("int8", b""),
        ("int16", b"\x00"),
        ("int32", b"\x00\x00\x00"),
        ("int64", b"\x00" * 7),
        ("uint16", b"\x00"),
        ("uint32", b"\x00" * 3),
        ("float64", b"\x00" * 7),
        ("bool", b""),
        ("uuid", b"\x00" * 15),
        ("unsigned_varint", b"\x80"),
        ("varint", b""),
        ("varlong", b"\xff"),
        ("string", b"\x00\x05abc"),
        ("compact_string", b"\x06abc"),
        ("bytes", b"\x00\x00\x00\x09abc"),
        ("compact_nullable_bytes", b"\x05ab"),
        ("array_length", b"\x00\x00"),
        ("tagged_fields", b"\x01\x00\x05ab"),
    ],
)
def test_truncated_input_raises_decode_error(method: str, data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        getattr(Reader(data), method)()


def test_read_raw_is_zero_copy_and_bounded() -> None:
    data = bytearray(b"abcdef")
    reader = Reader(data)
    view = reader.read_raw(3)
    assert view.obj is data and bytes(view) == b"abc" and reader.pos == 3
    with pytest.raises(ProtocolDecodeError):
        reader.read_raw(4)


def test_check_count_bounds_array_lengths_by_remaining_bytes() -> None:
    p.check_count(b"\x00" * 8, 0, 2, 4)
    with pytest.raises(ProtocolDecodeError):
        p.check_count(b"\x00" * 8, 0, 2**31, 1)


@QUICK
@given(
    st.integers(-(2**7), 2**7 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.uuids(),
    st.none() | st.text(max_size=20),
    st.none() | st.binary(max_size=20),
    st.integers(-(2**31), 2**31 - 1),
)
def test_writer_reader_round_trip(i8, i16, i32, i64, u16, u32, f64, flag, uid, text, blob, signed) -> None:
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.uint16(u16)
    w.uint32(u32)
    w.float64(f64)
    w.bool(flag)
    w.uuid(uid)
    w.nullable_string(text)
    w.compact_nullable_string(text)
    w.nullable_bytes(blob)
    w.compact_nullable_bytes(blob)
    w.varint(signed)
    w.array_length(None)
    w.compact_array_length(3)
    r = Reader(w.getvalue())
    values = [
        r.int8(),
        r.int16(),
        r.int32(),
        r.int64(),
        r.uint16(),
        r.uint32(),
        r.float64(),
        r.bool(),
        r.uuid(),
    ]
    assert values == [i8, i16, i32, i64, u16, u32, f64, flag, uid]
    assert [r.nullable_string(), r.compact_nullable_string()] == [text, text]
    assert [r.nullable_bytes(), r.compact_nullable_bytes()] == [blob, blob]
    assert [r.varint(), r.array_length(), r.compact_array_length()] == [signed, -1, 3]
    assert r.remaining == 0


def test_tagged_fields_are_written_in_tag_order_and_read_back() -> None:
    w = Writer()
    w.tagged_fields({5: b"xy", 1: b"z"})
    assert w.getvalue() == bytes.fromhex("02 01 01 7a 05 02 7879")
    fields = Reader(w.getvalue()).tagged_fields()
    assert {tag: bytes(raw) for tag, raw in fields.items()} == {1: b"z", 5: b"xy"}


def test_records_size_and_parts() -> None:
    value = [b"ab", FileSlice(7, 0, 100), memoryview(b"cde")]
    assert p.records_size(value) == 105
    out, chunks = bytearray(b"head"), []
    p.write_records_parts(out, chunks, value)
    assert chunks == [b"headab", FileSlice(7, 0, 100)] and out == b"cde"


def test_zero_uuid_is_sixteen_zero_bytes() -> None:
    assert p.ZERO_UUID == uuid.UUID(int=0) and p.ZERO_UUID.bytes == bytes(16)
