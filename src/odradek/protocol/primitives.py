"""Kafka's primitive wire types: reading from a `memoryview` at a position, writing to a `bytearray`.

Owns: the encodings of int8..int64, uint16/uint32, float64, bool, uuid, unsigned varint, zig-zag
varint/varlong, (compact) (nullable) string and bytes, (compact) array lengths, tagged field
sections and `records` fields; the errors raised on malformed input; `FileSlice`.

Invariants:
- Reading never leaks `IndexError` or `struct.error`: input that ends early or is malformed raises
  `ProtocolDecodeError` (a `ValueError`).
- A length read from the wire is checked against the bytes that remain before anything is allocated
  or sliced, so a hostile length of 2**31 costs nothing.
- Decoded `bytes`/`records` values that must stay zero copy are `memoryview` slices of the input.

Two levels: module functions `read_*(buf, pos) -> (value, new_pos)` and `write_*(out, value)` are
what the compiled codec calls on its hot path; `Reader` and `Writer` wrap them for hand-written code
(headers, record batches, tests). Anyone may call this module; it does no I/O.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.native import mypyc_attr

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
ZERO_UUID = uuid.UUID(int=0)
_ONE_BYTE = [bytes((i,)) for i in range(256)]


class ProtocolDecodeError(ValueError):
    """The input is not a valid encoding (truncated, a bad length, an impossible null...)."""


class ProtocolEncodeError(ValueError):
    """A message cannot be encoded at the requested version (a null where none is allowed...)."""


class UnsupportedVersionError(ValueError):
    """The API key is unknown or the version is outside the range this codec knows."""


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`length` bytes of an open file descriptor from `offset`: record bytes the network layer
    sends with `sendfile` instead of reading them into Python."""

    fd: int
    offset: int
    length: int


# ---------------------------------------------------------------------------------------------
# varints


def read_unsigned_varint(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 value of at most 5 bytes (a 32-bit quantity)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return _read_long_uvarint(buf, pos, 5)


def read_unsigned_varlong(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 value of at most 10 bytes (a 64-bit quantity)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return _read_long_uvarint(buf, pos, 10)


def _read_long_uvarint(buf: Any, pos: int, max_bytes: int) -> tuple[int, int]:
    value = 0
    for i in range(max_bytes):
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value, pos + i + 1
    raise ProtocolDecodeError(f"varint longer than {max_bytes} bytes at position {pos}")


def read_varint(buf: Any, pos: int) -> tuple[int, int]:
    """A zig-zag encoded signed 32-bit varint."""
    raw, pos = read_unsigned_varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Any, pos: int) -> tuple[int, int]:
    """A zig-zag encoded signed 64-bit varint."""
    raw, pos = read_unsigned_varlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def unsigned_varint_bytes(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        raise ProtocolEncodeError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """Zig-zag encoding of a signed 32-bit value."""
    return unsigned_varint_bytes(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_bytes(value: int) -> bytes:
    """Zig-zag encoding of a signed 64-bit value."""
    return unsigned_varint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def unsigned_varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def varint_size(value: int) -> int:
    return unsigned_varint_size(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_size(value: int) -> int:
    return unsigned_varint_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += unsigned_varint_bytes(value)


# ---------------------------------------------------------------------------------------------
# lengths, strings, bytes


def check_length(buf: Any, pos: int, length: int) -> int:
    """Return the end of a `length`-byte item at `pos`, or raise if the input is shorter."""
    end = pos + length
    if end > len(buf):
        raise ProtocolDecodeError(f"length {length} at position {pos} runs past the end ({len(buf)})")
    return end


def check_count(buf: Any, pos: int, count: int, min_item_size: int) -> None:
    """Refuse an element count that cannot fit in the remaining bytes."""
    if count * min_item_size > len(buf) - pos:
        raise ProtocolDecodeError(f"array of {count} items at position {pos} exceeds the input")


def _not_null(what: str, pos: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"null {what} at position {pos} where none is allowed")


def read_array_length(buf: Any, pos: int) -> tuple[int, int]:
    """int32 element count; -1 means null."""
    return INT32.unpack_from(buf, pos)[0], pos + 4


def read_compact_array_length(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned varint count + 1; -1 (wire 0) means null."""
    n, pos = read_unsigned_varint(buf, pos)
    return n - 1, pos


def read_nullable_string(buf: Any, pos: int) -> tuple[str | None, int]:
    n = INT16.unpack_from(buf, pos)[0]
    pos += 2
    if n < 0:
        return None, pos
    end = check_length(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_string(buf: Any, pos: int) -> tuple[str, int]:
    value, end = read_nullable_string(buf, pos)
    if value is None:
        raise _not_null("string", pos)
    return value, end


def read_compact_nullable_string(buf: Any, pos: int) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = _read_long_uvarint(buf, pos, 5)
    if n == 0:
        return None, pos
    end = check_length(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: Any, pos: int) -> tuple[str, int]:
    value, end = read_compact_nullable_string(buf, pos)
    if value is None:
        raise _not_null("string", pos)
    return value, end


def read_nullable_bytes_view(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    """int32-length bytes as a zero-copy slice of `buf` (which must be a memoryview)."""
    n = INT32.unpack_from(buf, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    end = check_length(buf, pos, n)
    return buf[pos:end], end


def read_compact_nullable_bytes_view(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        return None, pos
    end = check_length(buf, pos, n - 1)
    return buf[pos:end], end


def read_nullable_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    view, end = read_nullable_bytes_view(buf, pos)
    return (None if view is None else bytes(view)), end


def read_bytes(buf: Any, pos: int) -> tuple[bytes, int]:
    value, end = read_nullable_bytes(buf, pos)
    if value is None:
        raise _not_null("bytes", pos)
    return value, end


def read_compact_nullable_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    view, end = read_compact_nullable_bytes_view(buf, pos)
    return (None if view is None else bytes(view)), end


def read_compact_bytes(buf: Any, pos: int) -> tuple[bytes, int]:
    value, end = read_compact_nullable_bytes(buf, pos)
    if value is None:
        raise _not_null("bytes", pos)
    return value, end


def read_uuid(buf: Any, pos: int) -> tuple[uuid.UUID, int]:
    end = check_length(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_unsigned_varint(out, len(data) + 1)
    out += data


def write_nullable_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(_nbytes(value))
    out += value


def write_compact_nullable_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out.append(0)
        return
    write_unsigned_varint(out, _nbytes(value) + 1)
    out += value


def _nbytes(value: bytes | bytearray | memoryview) -> int:
    return value.nbytes if type(value) is memoryview else len(value)


# ---------------------------------------------------------------------------------------------
# tagged fields


def read_tagged_fields(buf: Any, pos: int) -> tuple[dict[int, memoryview], int]:
    """A tagged field section as {tag: raw value bytes} (slices of `buf`)."""
    count, pos = read_unsigned_varint(buf, pos)
    check_count(buf, pos, count, 2)
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_unsigned_varint(buf, pos)
        size, pos = read_unsigned_varint(buf, pos)
        end = check_length(buf, pos, size)
        fields[tag] = buf[pos:end]
        pos = end
    return fields, pos


def write_tagged_fields(out: bytearray, fields: dict[int, bytes]) -> None:
    """Write {tag: raw value bytes} in ascending tag order, as Kafka requires."""
    write_unsigned_varint(out, len(fields))
    for tag in sorted(fields):
        raw = fields[tag]
        write_unsigned_varint(out, tag)
        write_unsigned_varint(out, len(raw))
        out += raw


# ---------------------------------------------------------------------------------------------
# records fields

RecordsValue = bytes | bytearray | memoryview | FileSlice | list | tuple | None


def records_size(value: RecordsValue) -> int:
    """Total byte length of a records value made of bytes-like parts and `FileSlice`s."""
    if isinstance(value, FileSlice):
        return value.length
    if isinstance(value, list | tuple):
        return sum(records_size(part) for part in value)
    if value is None:
        return 0
    return _nbytes(value)


def write_records_parts(out: bytearray, chunks: list, value: RecordsValue) -> None:
    """Append record bytes to `out`; a `FileSlice` closes the current chunk and becomes its own."""
    if isinstance(value, FileSlice):
        if out:
            chunks.append(bytes(out))
            out.clear()
        chunks.append(value)
    elif isinstance(value, list | tuple):
        for part in value:
            write_records_parts(out, chunks, part)
    elif value is not None:
        out += value


# ---------------------------------------------------------------------------------------------
# Reader / Writer for hand-written code


def _decoding(fn: Callable[..., tuple[Any, int]]) -> Callable[[Reader], Any]:
    name = getattr(fn, "__name__", "read")  # a compiled closure has none

    def method(self: Reader) -> Any:
        try:
            value, self.pos = fn(self.buf, self.pos)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise ProtocolDecodeError(f"{name} at position {self.pos}: {exc}") from None
        return value

    method.__name__ = name.removeprefix("read_")
    method.__doc__ = fn.__doc__
    return method


def _fixed(codec: struct.Struct) -> Callable[[Any, int], tuple[Any, int]]:
    def read(buf: Any, pos: int) -> tuple[Any, int]:
        return codec.unpack_from(buf, pos)[0], pos + codec.size

    return read


def _read_bool(buf: Any, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


@mypyc_attr(native_class=False)  # its methods are made by `_decoding`, which a native class cannot hold
class Reader:
    """Sequential reads over a memoryview; every method raises `ProtocolDecodeError` on bad input."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.buf = buf if type(buf) is memoryview else memoryview(buf)
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def read_raw(self, length: int) -> memoryview:
        """The next `length` bytes as a zero-copy slice."""
        end = check_length(self.buf, self.pos, length)
        view, self.pos = self.buf[self.pos : end], end
        return view

    int8 = _decoding(_fixed(INT8))
    int16 = _decoding(_fixed(INT16))
    int32 = _decoding(_fixed(INT32))
    int64 = _decoding(_fixed(INT64))
    uint16 = _decoding(_fixed(UINT16))
    uint32 = _decoding(_fixed(UINT32))
    float64 = _decoding(_fixed(FLOAT64))
    bool = _decoding(_read_bool)
    uuid = _decoding(read_uuid)
    unsigned_varint = _decoding(read_unsigned_varint)
    varint = _decoding(read_varint)
    varlong = _decoding(read_varlong)
    string = _decoding(read_string)
    nullable_string = _decoding(read_nullable_string)
    compact_string = _decoding(read_compact_string)
    compact_nullable_string = _decoding(read_compact_nullable_string)
    bytes = _decoding(read_bytes)
    nullable_bytes = _decoding(read_nullable_bytes)
    compact_bytes = _decoding(read_compact_bytes)
    compact_nullable_bytes = _decoding(read_compact_nullable_bytes)
    array_length = _decoding(read_array_length)
    compact_array_length = _decoding(read_compact_array_length)
    tagged_fields = _decoding(read_tagged_fields)


class Writer:
    """Appends Kafka primitives to a bytearray; `getvalue()` returns the bytes written."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def int8(self, value: int) -> None:
        self.buf += INT8.pack(value)

    def int16(self, value: int) -> None:
        self.buf += INT16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += INT32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += INT64.pack(value)

    def uint16(self, value: int) -> None:
        self.buf += UINT16.pack(value)

    def uint32(self, value: int) -> None:
        self.buf += UINT32.pack(value)

    def float64(self, value: float) -> None:
        self.buf += FLOAT64.pack(value)

    def bool(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def uuid(self, value: uuid.UUID) -> None:
        self.buf += value.bytes

    def unsigned_varint(self, value: int) -> None:
        write_unsigned_varint(self.buf, value)

    def varint(self, value: int) -> None:
        self.buf += varint_bytes(value)

    def varlong(self, value: int) -> None:
        self.buf += varlong_bytes(value)

    def nullable_string(self, value: str | None) -> None:
        write_nullable_string(self.buf, value)

    def compact_nullable_string(self, value: str | None) -> None:
        write_compact_nullable_string(self.buf, value)

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> None:
        write_nullable_bytes(self.buf, value)

    def compact_nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> None:
        write_compact_nullable_bytes(self.buf, value)

    def array_length(self, count: int | None) -> None:
        self.buf += INT32.pack(-1 if count is None else count)

    def compact_array_length(self, count: int | None) -> None:
        write_unsigned_varint(self.buf, 0 if count is None else count + 1)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        write_tagged_fields(self.buf, fields)
