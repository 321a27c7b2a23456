"""`odradek dump-log` (kafka-dump-log) through the entry point, on segment files a broker process wrote.

The records a dump shows are compared with what confluent-kafka reads back from the broker; batch
CRCs are recomputed here with the crc32c package; damaged copies of the files must be reported in
Kafka's words and with exit status 1.
"""

from __future__ import annotations

import re
import shutil
import struct
import time
from pathlib import Path

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

QUIET = {"log_level": 3}
RECORDS = 30
FIRST = "00000000000000000000"
BATCH = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: -1 lastSequence: -1 producerId: -1 "
    r"producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    r"deleteHorizonMs: OptionalLong.empty position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 "
    r"compresscodec: none crc: (\d+) isvalid: true"
)


@pytest.fixture
def segment(tool_broker, unique_topic: str, tmp_path: Path) -> tuple[Path, list]:
    """A copy of the first, closed segment of a topic of one-record batches, and the records as read."""
    admin = AdminClient({"bootstrap.servers": tool_broker.bootstrap, **QUIET})
    configs = {"segment.bytes": "1000", "index.interval.bytes": "1"}
    admin.create_topics([NewTopic(unique_topic, 1, 1, config=configs)])[unique_topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": tool_broker.bootstrap, "linger.ms": 0, **QUIET})
    for i in range(RECORDS):
        producer.produce(
            unique_topic, b"value-%d" % i, b"k%d" % i, 0, headers=[("h", b"x")] if i % 2 else None
        )
        assert producer.flush(30) == 0
    source = tool_broker.data_dir / f"{unique_topic}-0"
    deadline = time.monotonic() + 30
    while not (source / f"{FIRST}.timeindex").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(source / f"{FIRST}{suffix}", tmp_path)
    consumer = Consumer({"bootstrap.servers": tool_broker.bootstrap, "group.id": "dump", **QUIET})
    try:
        consumer.assign([TopicPartition(unique_topic, 0, 0)])
        records = consumer.consume(RECORDS, timeout=30)
    finally:
        consumer.close()
    return tmp_path / FIRST, records


def test_log_batches_and_records(segment: tuple[Path, list]) -> None:
    base, records = segment
    lines = ok("dump-log", "--files", f"{base}.log", "--print-data-log").splitlines()
    assert lines[:2] == [f"Dumping {base}.log", "Log starting offset: 0"]
    data = Path(f"{base}.log").read_bytes()
    batches = [BATCH.fullmatch(line) for line in lines[2::2]]
    assert all(batches), lines
    position = 0
    for match, record_line in zip(batches, lines[3::2], strict=True):
        base_offset, last_offset, count, at, stamp, size, crc = (int(g) for g in match.groups())
        record = records[base_offset]
        assert (base_offset, last_offset, count, at) == (record.offset(), record.offset(), 1, position)
        assert stamp == record.timestamp()[1]
        assert crc == crc32c.crc32c(data[at + 21 : at + size])
        header_keys = "[h]" if record.headers() else "[]"
        assert record_line == (
            f"| offset: {record.offset()} CreateTime: {stamp} keySize: {len(record.key())} "
            f"valueSize: {len(record.value())} sequence: -1 headerKeys: {header_keys} "
            f"key: {record.key().decode()} payload: {record.value().decode()}"
        )
        position += size
    assert position == len(data) and len(batches) > 5

    shallow = ok("dump-log", "--files", f"{base}.log").splitlines()
    assert shallow == lines[:2] + lines[2::2]
    deep = ok("dump-log", "--files", f"{base}.log", "--deep-iteration").splitlines()
    assert deep[3] == lines[3].split(" key: ")[0]


def test_a_damaged_log_tail_is_reported(segment: tuple[Path, list]) -> None:
    base, _ = segment
    with open(f"{base}.log", "ab") as log:
        log.write(b"\x00" * 10)
    out = ok("dump-log", "--files", f"{base}.log")
    assert out.splitlines()[-1] == f"Found 10 invalid bytes at the end of {FIRST}.log"


def test_a_corrupt_batch_is_invalid_and_its_records_an_error(segment: tuple[Path, list]) -> None:
    base, _ = segment
    log = Path(f"{base}.log")
    data = bytearray(log.read_bytes())
    data[61] = 0x7F  # the first record's length: now past the end of its batch
    log.write_bytes(data)
    done = run_odradek("dump-log", "--files", str(log), "--deep-iteration")
    assert done.returncode == 1, exit_report(done)
    assert done.stdout.splitlines()[2].endswith(" isvalid: false")
    assert done.stderr == f"Error: {log}: record runs past the end of its batch\n"


def positions(dump: list[str]) -> dict[int, int]:
    return {
        int(m[1]): int(m[2])
        for m in (re.search(r"baseOffset: (\d+) .* position: (\d+) ", x) for x in dump)
        if m
    }


def test_index_entries_point_at_their_batches(segment: tuple[Path, list]) -> None:
    base, _ = segment
    batches = positions(ok("dump-log", "--files", f"{base}.log").splitlines())
    lines = ok("dump-log", "--files", f"{base}.index").splitlines()
    assert lines[0] == f"Dumping {base}.index"
    entries = [
        tuple(int(v) for v in re.fullmatch(r"offset: (\d+) position: (\d+)", x).groups()) for x in lines[1:]
    ]
    assert len(entries) > 5 and all(batches[offset] == position for offset, position in entries)
    assert ok("dump-log", "--files", f"{base}.index", "--verify-index-only") == f"Dumping {base}.index\n"
    assert ok("dump-log", "--files", f"{base}.index", "--index-sanity-check").splitlines() == [
        f"Dumping {base}.index",
        f"{base}.index passed sanity check.",
    ]


def test_a_damaged_index_is_reported(segment: tuple[Path, list]) -> None:
    base, _ = segment
    index = Path(f"{base}.index")
    entries = list(struct.iter_unpack(">ii", index.read_bytes()))
    entries[2] = (entries[2][0], entries[4][1])  # the third entry now points at the fifth batch
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    done = run_odradek("dump-log", "--files", str(index), "--verify-index-only")
    assert done.returncode == 1, exit_report(done)
    assert done.stderr.splitlines() == [
        f"Mismatches in :{index.resolve()}",
        f"  Index offset: {entries[2][0]}, log offset: {entries[4][0]}",
    ]

    entries[3], entries[4] = entries[4], entries[3]
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    insane = run_odradek("dump-log", "--files", str(index), "--index-sanity-check")
    assert insane.returncode == 1, exit_report(insane)
    assert insane.stderr.startswith(f"Error: {index} failed the sanity check: ")


def test_time_index_entries_and_a_damaged_one(segment: tuple[Path, list]) -> None:
    base, records = segment
    path = Path(f"{base}.timeindex")
    lines = ok("dump-log", "--files", str(path)).splitlines()
    entries = [
        tuple(int(v) for v in re.fullmatch(r"timestamp: (\d+) offset: (\d+)", x).groups()) for x in lines[1:]
    ]
    assert entries and all(t == max(r.timestamp()[1] for r in records[:offset]) for t, offset in entries)

    raw = list(struct.iter_unpack(">qi", path.read_bytes()))
    raw[0] = (raw[0][0] - 5, raw[0][1])
    path.write_bytes(b"".join(struct.pack(">qi", *e) for e in raw))
    done = run_odradek("dump-log", "--files", str(path), "--verify-index-only")
    assert done.returncode == 1, exit_report(done)
    assert done.stderr.splitlines()[:2] == [
        f"Found timestamp mismatch in :{path.resolve()}",
        f"  Index timestamp: {raw[0][0]}, log timestamp: {raw[0][0] + 5}",
    ]


def test_unknown_and_missing_files(tmp_path: Path) -> None:
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    missing = tmp_path / f"{FIRST}.log"
    done = run_odradek("dump-log", "--files", f"{other},{missing}")
    assert done.returncode == 1, exit_report(done)
    assert done.stdout.splitlines() == [
        f"Dumping {other}",
        f"Ignoring unknown file {other}",
        f"Dumping {missing}",
        "Log starting offset: 0",
    ]
    assert done.stderr == f"Error: cannot read {missing}: No such file or directory\n"


def test_a_compressed_idempotent_batch(tool_broker, unique_topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": tool_broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic].result(timeout=60)
    config = {"linger.ms": 500, "compression.type": "gzip", "enable.idempotence": True, **QUIET}
    producer = Producer({"bootstrap.servers": tool_broker.bootstrap, **config})
    for i in range(3):
        producer.produce(unique_topic, b"a" * 500 + b"%d" % i, b"k%d" % i, 0)
    assert producer.flush(30) == 0
    log = tool_broker.data_dir / f"{unique_topic}-0" / f"{FIRST}.log"
    batch, *records = ok("dump-log", "--files", str(log), "--print-data-log").splitlines()[2:]
    assert re.fullmatch(
        r"baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: \d+ "
        r"producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        r"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: \d+ size: \d+ magic: 2 "
        r"compresscodec: gzip crc: \d+ isvalid: true",
        batch,
    ), batch
    assert [r.split(" CreateTime: ")[0] for r in records] == [f"| offset: {i}" for i in range(3)]
    assert [r.split(" keySize: ")[1] for r in records] == [
        f"2 valueSize: 501 sequence: {i} headerKeys: [] key: k{i} payload: {'a' * 500}{i}" for i in range(3)
    ]
