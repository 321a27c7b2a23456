"""The loops that visit every record: the produce-side walk and the columnar decode.

Owns the two per-record hot loops over the varint record layout of `records.record`:
- `walk_records` checks records field by field without building anything, over a window of a batch's
  records section (the part of it that validation holds at a time): each record fills exactly
  its length prefix, its offsetDelta is its index, its timestampDelta lies within the given bounds,
  key and value lengths are >= -1, the header count is >= 0, header keys are not null and, for a
  compacted topic, the key is not null (InvalidRecordError, Kafka's INVALID_RECORD; a timestamp out
  of bounds is InvalidTimestampError).
- `read_record_times` reads only each record's timestamp and offset deltas (ListOffsets lookups);
- `decode_records_into` appends each record's offset, timestamp, timestamp type, key, value and
  headers to parallel lists (the Spark source, clients, internal topics).

Invariants: plain, fully typed Python, so that `tools/build_native.py` can compile this module with
mypyc (about 10x fewer ns per record for both loops); the compiled module and this
source behave the same, and the tests run both. Only the standard library and `records.errors` are
imported, which keeps the compiled unit small. A varint longer than 10 bytes is CorruptRecordError;
a read past the end of `data` raises IndexError, which the callers in `records.record` turn into
the Kafka error of their context.

Callers: `records.validation` (`walk_records`), `records.record` (`decode_batch_into`).
"""

from __future__ import annotations

from odradek.protocol.records.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError

Header = tuple[str, bytes | None]
# offsets, timestamps, timestamp types, keys, values, headers: one entry per record in each
Columns = tuple[
    list[int], list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]]
]


def walk_records(
    data: bytes,
    position: int,
    first_index: int,
    records_left: int,
    min_timestamp_delta: int,
    max_timestamp_delta: int,
    require_key: bool,
) -> tuple[int, int]:
    """Check the records that lie whole in `data` from `position` on, at most `records_left`, the
    first being record number `first_index` of its batch; stop before a record that `data` does not
    hold whole. Return (records checked, the position after the last).
    `require_key`: a record with a null key is refused (a compacted topic's rule)."""
    end = len(data)
    walked = 0
    while walked < records_left:
        if end - position < 10 and not _holds_varint(data, position, end):
            break
        length, start = read_varint(data, position)
        if length < 0:
            raise InvalidRecordError(f"record {first_index + walked} has length {length}")
        record_end = start + length
        if record_end > end:
            break
        index = first_index + walked
        timestamp_delta, position = read_varint(data, start + 1)  # past the attributes byte
        if timestamp_delta < min_timestamp_delta or timestamp_delta > max_timestamp_delta:
            raise InvalidTimestampError(f"record {index} has a timestamp outside the allowed bounds")
        offset_delta, position = read_varint(data, position)
        if offset_delta != index:
            raise InvalidRecordError(f"record {index} has offsetDelta {offset_delta}")
        key_position = position
        position = skip_bytes(data, position)
        if require_key and position == key_position + 1 and data[key_position] == 1:  # zigzag -1
            raise InvalidRecordError(f"record {index} has no key, which a compacted topic requires")
        position = skip_bytes(data, position)  # the value
        if data[position] == 0:  # no headers
            position += 1
        else:
            position = skip_headers(data, position, record_end)
        if position != record_end:
            raise InvalidRecordError(f"record {index} does not fill its length of {length} bytes")
        walked += 1
    return walked, position


def _holds_varint(data: bytes, position: int, end: int) -> bool:
    """Whether a whole varint starts at `position` (its last byte is before `end`)."""
    while position < end:
        if data[position] < 0x80:
            return True
        position += 1
    return False


def walk_headers(data: bytes, position: int, headers_left: int) -> tuple[int, int]:
    """Check the headers that lie whole in `data` from `position` on, at most `headers_left`; stop
    before one that `data` does not hold whole. Return (headers checked, the position after the last).
    For a record too long to be held at once (validation walks its other fields itself)."""
    end = len(data)
    walked = 0
    while walked < headers_left:
        if end - position < 10 and not _holds_varint(data, position, end):
            break
        key_length, key_end = read_varint(data, position)
        if key_length < 0:
            raise InvalidRecordError("null or negative-length header key")
        if end - key_end - key_length < 10 and not _holds_varint(data, key_end + key_length, end):
            break
        value_length, value_start = read_varint(data, key_end + key_length)
        if value_length < -1:
            raise InvalidRecordError(f"negative length {value_length}")
        if value_start + max(value_length, 0) > end:
            break
        position = value_start + max(value_length, 0)
        walked += 1
    return walked, position


def read_record_times(data: bytes, position: int, records_left: int, deltas: list[int]) -> tuple[int, int]:
    """Append the timestampDelta and offsetDelta of each record that lies whole in `data` from
    `position` on (at most `records_left`) to `deltas`, two entries per record, reading nothing
    else; stop before a record `data` does not hold whole. Return (records read, position after)."""
    end = len(data)
    read = 0
    while read < records_left:
        if end - position < 10 and not _holds_varint(data, position, end):
            break
        length, start = read_varint(data, position)
        if length < 0:
            raise CorruptRecordError("negative record length")
        if start + length > end:
            break
        timestamp_delta, field = read_varint(data, start + 1)
        deltas.append(timestamp_delta)
        deltas.append(read_varint(data, field)[0])
        position = start + length
        read += 1
    return read, position


def skip_headers(data: bytes, position: int, record_end: int) -> int:
    count, position = read_varint(data, position)
    if count < 0 or count > record_end - position:
        raise InvalidRecordError(f"impossible header count {count}")
    for _ in range(count):
        key_length, position = read_varint(data, position)
        if key_length < 0:
            raise InvalidRecordError("null or negative-length header key")
        position = skip_bytes(data, position + key_length)
    return position


def skip_bytes(data: bytes, position: int) -> int:
    """The position after a varint-length-prefixed field (length -1: null)."""
    length, position = read_varint(data, position)
    if length < -1:
        raise InvalidRecordError(f"negative length {length}")
    return position + length if length > 0 else position


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at `position`."""
    byte = data[position]
    if byte < 0x80:  # most lengths and deltas: one byte
        return (byte >> 1) ^ -(byte & 1), position + 1
    result = 0
    shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_records_into(
    data: bytes,
    records_count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int,
    columns: tuple[
        list[int], list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]]
    ],
) -> None:
    """Append the `records_count` records of `data` to `columns`: (offsets, timestamps, timestamp
    types, keys, values, headers). `log_append_time` >= 0 replaces every record's timestamp."""
    offsets, timestamps, types, keys, values, headers_out = columns
    timestamp_type = 0 if log_append_time < 0 else 1
    position, end = 0, len(data)
    for _ in range(records_count):
        length, position = read_varint(data, position)
        record_end = position + length
        if length < 0 or record_end > end:
            raise CorruptRecordError("record runs past the end of its batch")
        timestamp_delta, position = read_varint(data, position + 1)
        offset_delta, position = read_varint(data, position)
        key, position = read_bytes(data, position, record_end)
        value, position = read_bytes(data, position, record_end)
        if data[position] == 0:
            record_headers: tuple[Header, ...] = ()
            position += 1
        else:
            record_headers, position = read_headers(data, position, record_end)
        if position != record_end:
            raise CorruptRecordError("record length does not match its fields")
        offsets.append(base_offset + offset_delta)
        timestamps.append(base_timestamp + timestamp_delta if log_append_time < 0 else log_append_time)
        types.append(timestamp_type)
        keys.append(key)
        values.append(value)
        headers_out.append(record_headers)


def read_bytes(data: bytes, position: int, limit: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed field ending at or before `limit`; length -1 is None."""
    length, position = read_varint(data, position)
    if length < 0:
        return None, position
    end = position + length
    if end > limit:
        raise CorruptRecordError("record field runs past the end of its record")
    return data[position:end], end


def read_headers(data: bytes, position: int, limit: int) -> tuple[tuple[Header, ...], int]:
    count, position = read_varint(data, position)
    if count < 0:
        raise CorruptRecordError("negative header count")
    headers: list[Header] = []
    for _ in range(count):
        key, position = read_bytes(data, position, limit)
        if key is None:
            raise CorruptRecordError("null header key")
        value, position = read_bytes(data, position, limit)
        try:
            headers.append((key.decode(), value))
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("header key is not UTF-8") from exc
    return tuple(headers), position
