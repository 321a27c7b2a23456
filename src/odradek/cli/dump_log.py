"""`odradek dump-log`: kafka-dump-log.sh, reading segment files offline.

    odradek dump-log --files A.log,B.index,C.timeindex [--print-data-log] [--deep-iteration]
        [--index-sanity-check] [--verify-index-only]

For each file `Dumping FILE`, then, as Kafka 3.9's DumpLogSegments prints them:
- a `.log`: `Log starting offset: N` and per batch `baseOffset: ... lastOffset: ... count: ...
  baseSequence: ... lastSequence: ... producerId: ... producerEpoch: ... partitionLeaderEpoch: ...
  isTransactional: ... isControl: ... deleteHorizonMs: ... position: ... CreateTime: ... size: ...
  magic: 2 compresscodec: ... crc: ... isvalid: ...`; with --deep-iteration (or --print-data-log)
  per record `| offset: ... CreateTime: ... keySize: ... valueSize: ... sequence: ... headerKeys: [...]`,
  plus ` key: ...` / ` payload: ...` (UTF-8) with --print-data-log, or ` endTxnMarker: COMMIT
  coordinatorEpoch: N` for a transaction marker; `Found N invalid bytes at the end of FILE` for a tail
  that is not a whole, well-formed batch.
- a `.index`: `offset: O position: P` per entry; an entry whose position does not hold a batch starting
  at, or ending with, offset O is reported on stderr (`Mismatches in :PATH` and `  Index offset: O, log
  offset: L`). odradek indexes a batch's base offset where Kafka indexes its last offset; both count
  as a match, so files written by either are checked.
- a `.timeindex`: `timestamp: T offset: O` per entry; stderr reports (`Found timestamp mismatch in :`,
  `Found out of order timestamp in :`, `The following indexed offsets are not found in the log.`) for
  entries the segment's batches contradict, in odradek's or Kafka's meaning of an entry.
--index-sanity-check runs the check a broker runs at start instead (`FILE passed sanity check.`);
--verify-index-only reports mismatches without listing the entries. Other files are skipped with
`Ignoring unknown file FILE`. Exit status 1 when a file cannot be read, a sanity check fails, an
index mismatch is found or a batch's records cannot be decoded (one stderr line; the dump of that
file stops there).

Reads with odradek's own record decoding (odradek.protocol.records) and index classes
(odradek.storage.index); the log file is mapped, not read into memory.
"""

from __future__ import annotations

import argparse
import mmap
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.cli.common import ToolError
from odradek.protocol.records.batch import (
    CONTROL_MASK,
    BatchHeader,
    TimestampType,
    batch_crc,
    iter_batches,
)
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.errors import RecordsError
from odradek.protocol.records.record import RecordColumns, decode_batch_into
from odradek.storage.index import IndexCorruptError, OffsetIndex, TimeIndex

COMMAND = "dump-log"
HELP = "print the batches, records and index entries of segment files (kafka-dump-log)"

DELETE_HORIZON_MASK = 0x40
NO_TIMESTAMP = -1
TIMESTAMP_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
}
MARKERS = {0: "ABORT", 1: "COMMIT"}
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
_UNBOUNDED = 1 << 31


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--files",
        required=True,
        type=lambda text: [f for f in text.split(",") if f],
        metavar="FILE,FILE,...",
        help=".log, .index and .timeindex files",
    )
    parser.add_argument("--print-data-log", action="store_true", help="print keys and values (implies deep)")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    parser.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    parser.add_argument("--verify-index-only", action="store_true", help="only report index mismatches")


def run(args: argparse.Namespace) -> int:
    status = 0
    for name in args.files:
        path = Path(name)
        print(f"Dumping {path}")
        try:
            status |= _DUMPERS.get(path.suffix, _unknown)(path, args)
        except BrokenPipeError:  # stdout's reader went away (`| head`): cli/main.py ends the tool quietly
            raise
        except OSError as exc:
            print(f"Error: cannot read {exc.filename or path}: {exc.strerror}", file=sys.stderr)
            status = 1
        except (ToolError, IndexCorruptError) as exc:
            print(f"Error: {exc}", file=sys.stderr)
            status = 1
        except RecordsError as exc:  # a batch whose records cannot be decoded (deep iteration)
            print(f"Error: {path}: {exc.message}", file=sys.stderr)
            status = 1
    return status


def _unknown(path: Path, _args: argparse.Namespace) -> int:
    print(f"Ignoring unknown file {path}")
    return 0


# ---------------------------------------------------------------------------------------------
# .log


def _dump_log(path: Path, args: argparse.Namespace) -> int:
    deep = args.deep_iteration or args.print_data_log
    print(f"Log starting offset: {_base_offset(path)}")
    with _mapped(path) as data:
        valid = 0
        for position, header in _batches(data):
            print(_batch_line(data, position, header))
            if deep:
                for line in _record_lines(data, position, header, args.print_data_log):
                    print(line)
            valid = position + header.size_in_bytes
        if len(data) > valid:
            print(f"Found {len(data) - valid} invalid bytes at the end of {path.name}")
    return 0


def _batches(data: memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """The well-formed batches from the start, stopping quietly at the first that is not."""
    try:
        yield from iter_batches(data)
    except RecordsError:
        return


def _batch_line(data: memoryview, position: int, header: BatchHeader) -> str:
    horizon = "OptionalLong.empty"
    if header.attributes & DELETE_HORIZON_MASK:
        horizon = f"OptionalLong[{header.base_timestamp}]"
    crc_ok = batch_crc(data, position, header.size_in_bytes) == header.crc
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
        f"baseSequence: {header.base_sequence} lastSequence: {_sequence(header, header.last_offset_delta)} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
        f"deleteHorizonMs: {horizon} position: {position} "
        f"{TIMESTAMP_NAMES[header.timestamp_type]}: {header.max_timestamp} size: {header.size_in_bytes} "
        f"magic: {header.magic} compresscodec: {CompressionType(header.compression).name.lower()} "
        f"crc: {header.crc & 0xFFFFFFFF} isvalid: {_bool(crc_ok)}"
    )


def _record_lines(data: memoryview, position: int, header: BatchHeader, contents: bool) -> Iterator[str]:
    columns = decode_batch_into(data, position, header, RecordColumns())
    kind = TIMESTAMP_NAMES[header.timestamp_type]
    for offset, timestamp, key, value, headers in zip(
        columns.offsets, columns.timestamps, columns.keys, columns.values, columns.headers, strict=True
    ):
        line = (
            f"| offset: {offset} {kind}: {timestamp} keySize: {_size(key)} valueSize: {_size(value)} "
            f"sequence: {_sequence(header, offset - header.base_offset)} "
            f"headerKeys: [{','.join(name for name, _ in headers)}]"
        )
        if header.attributes & CONTROL_MASK:
            line += _marker(key, value)
        elif contents:
            line += "" if key is None else f" key: {_text(key)}"
            line += "" if value is None else f" payload: {_text(value)}"
        yield line


def _marker(key: bytes | None, value: bytes | None) -> str:
    """Kafka's description of a control record (a transaction marker)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return ""
    _version, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in MARKERS or value is None or len(value) < _MARKER_VALUE.size:
        return f" unknownControlType: {kind}"
    _version, epoch = _MARKER_VALUE.unpack_from(value)
    return f" endTxnMarker: {MARKERS[kind]} coordinatorEpoch: {epoch}"


def _sequence(header: BatchHeader, delta: int) -> int:
    if header.base_sequence < 0:
        return -1
    return (header.base_sequence + delta) % _UNBOUNDED


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _bool(value: bool) -> str:
    return "true" if value else "false"


# ---------------------------------------------------------------------------------------------
# .index and .timeindex


def _dump_offset_index(path: Path, args: argparse.Namespace) -> int:
    index = _loaded(OffsetIndex, path)
    log_path = path.with_suffix(".log")
    with _mapped(log_path) as data:
        batches = dict(_batches(data))
        if args.index_sanity_check:
            return _sanity(
                path, lambda: index.sanity_check(_next_offset(batches, index.base_offset), len(data))
            )
        if not len(index):
            print(f"{path} is empty.")
            return 0
        mismatches = []
        for i, (relative, position) in enumerate(zip(index.keys, index.values, strict=True)):
            offset = index.base_offset + relative
            if relative == 0 and i > 0:
                break
            batch = batches.get(position)
            if batch is None or offset not in (batch.base_offset, batch.last_offset):
                mismatches.append((offset, -1 if batch is None else batch.base_offset))
            if not args.verify_index_only:
                print(f"offset: {offset} position: {position}")
    if mismatches:
        print(f"Mismatches in :{path.resolve()}", file=sys.stderr)
        for offset, found in mismatches:
            print(f"  Index offset: {offset}, log offset: {found}", file=sys.stderr)
    return 1 if mismatches else 0


def _dump_time_index(path: Path, args: argparse.Namespace) -> int:
    index = _loaded(TimeIndex, path)
    with _mapped(path.with_suffix(".log")) as data:
        batches = [header for _position, header in _batches(data)]
    if args.index_sanity_check:
        next_offset = _next_offset(dict(enumerate(batches)), index.base_offset)
        return _sanity(path, lambda: index.sanity_check(next_offset))
    problems = _TimeIndexProblems(path.resolve())
    previous = NO_TIMESTAMP
    for i, (timestamp, relative) in enumerate(zip(index.keys, index.values, strict=True)):
        offset = index.base_offset + relative
        if relative == 0 and i > 0:
            break
        problems.check(timestamp, offset, previous, batches)
        if not args.verify_index_only:
            print(f"timestamp: {timestamp} offset: {offset}")
        previous = timestamp
    return problems.report()


class _TimeIndexProblems:
    """The contradictions between a time index's entries and its segment's batches, Kafka's three kinds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mismatched: list[tuple[int, int]] = []
        self.out_of_order: list[tuple[int, int]] = []
        self.not_found: list[tuple[int, int]] = []

    def check(self, timestamp: int, offset: int, previous: int, batches: list[BatchHeader]) -> None:
        """An entry (T, O) holds when O starts a batch (or is the segment's end) and T is the largest
        timestamp below O (odradek), or O ends a batch and T is the largest up to O (Kafka)."""
        starts = {b.base_offset for b in batches} | {batches[-1].next_offset if batches else 0}
        ends = {b.last_offset for b in batches}
        if offset not in starts and offset not in ends:
            found = next((b.last_offset for b in batches if b.last_offset >= offset), -1)
            self.not_found.append((offset, found))
            return
        below = max((b.max_timestamp for b in batches if b.last_offset < offset), default=NO_TIMESTAMP)
        through = max((b.max_timestamp for b in batches if b.last_offset <= offset), default=NO_TIMESTAMP)
        if timestamp not in ((below,) if offset in starts else ()) + ((through,) if offset in ends else ()):
            self.mismatched.append((timestamp, below if offset in starts else through))
        if previous >= timestamp:
            self.out_of_order.append((timestamp, previous))

    def report(self) -> int:
        """Print what was found on stderr, in Kafka's words; 1 if anything was."""
        if self.mismatched:
            print(f"Found timestamp mismatch in :{self.path}", file=sys.stderr)
            for indexed, logged in self.mismatched:
                print(f"  Index timestamp: {indexed}, log timestamp: {logged}", file=sys.stderr)
        if self.out_of_order:
            print(f"Found out of order timestamp in :{self.path}", file=sys.stderr)
            for indexed, earlier in self.out_of_order:
                print(
                    f"  Index timestamp: {indexed}, Previously indexed timestamp: {earlier}", file=sys.stderr
                )
        if self.not_found:
            print("The following indexed offsets are not found in the log.", file=sys.stderr)
            for indexed, logged in self.not_found:
                print(f"Indexed offset: {indexed}, found log offset: {logged}", file=sys.stderr)
        return 1 if self.mismatched or self.out_of_order or self.not_found else 0


def _loaded(kind: type[OffsetIndex] | type[TimeIndex], path: Path) -> OffsetIndex | TimeIndex:
    """The index's entries (none when the file is missing: odradek writes an index when it flushes)."""
    index = kind(path, _base_offset(path), _UNBOUNDED)
    index.load()
    return index


def _sanity(path: Path, check: Callable[[], None]) -> int:
    try:
        check()
    except IndexCorruptError as exc:
        print(f"Error: {path} failed the sanity check: {exc}", file=sys.stderr)
        return 1
    print(f"{path} passed sanity check.")
    return 0


def _next_offset(batches: dict[int, BatchHeader], base_offset: int) -> int:
    return max((b.next_offset for b in batches.values()), default=base_offset)


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise ToolError(f"{path}: not a segment file (its name must be the base offset)") from None


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, mapped read-only (an empty file is an empty view)."""
    with open(path, "rb") as file:
        if Path(path).stat().st_size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            yield view


_DUMPERS = {".log": _dump_log, ".index": _dump_offset_index, ".timeindex": _dump_time_index}
