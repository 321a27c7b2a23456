"""Crash safety of a real broker process (invariant 5: crash safety without fsync per write).

- kill -9 under a live producer (acks=1 and acks=all, confluent-kafka in a subprocess recording every
  delivery report as it arrives), restart on the same log dir, read everything back: every
  acknowledged record is at its acknowledged offset, offsets are dense from 0, and only records that
  were unacknowledged at the crash may appear twice (the producer's retries).
- Damage done by hand to a stopped broker's files: a torn tail of the active segment and garbage
  appended after the last batch are dropped on restart; deleted .index/.timeindex files are rebuilt.
- SIGTERM: exit code 0, Kafka's clean-shutdown marker and a recovery point at the log end offset, so
  the next start has nothing to rescan; the data reads back.

Apache Kafka's behaviour is the oracle (LogLoader recovery, checkpoint file formats).
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers, wire
from tests.exit_report import exit_report

pytestmark = pytest.mark.slow

PRODUCER_SCRIPT = Path(__file__).with_name("crash_producer.py")


def read_acks(path: Path) -> list[tuple[int, bytes]]:
    """Complete `<offset> <value>` lines of the producer's delivery-report file."""
    lines = path.read_bytes().split(b"\n")[:-1]  # the last element is empty or a partial line
    return [(int(offset), value) for offset, value in (line.split(b" ") for line in lines)]


def wait_for_acks(path: Path, at_least: int, producer: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while time.monotonic() < deadline:
        assert producer.poll() is None, f"producer exited with {producer.returncode}\n" + exit_report(
            None, stderr_path(path)
        )
        if path.exists() and len(read_acks(path)) >= at_least:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {at_least} acknowledgements after {helpers.TIMEOUT_S}s")


def stderr_path(acks: Path) -> Path:
    """Where the producer writing `acks` puts its stderr."""
    return acks.with_name(acks.name + ".stderr")


def start_producer(bootstrap: str, topic: str, acks: str, out: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(PRODUCER_SCRIPT), bootstrap, topic, acks, str(out)]
    with open(stderr_path(out), "wb") as stderr:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=stderr)


def stop_producer(producer: subprocess.Popen[bytes]) -> int:
    """SIGTERM (flush in-flight records, then exit); SIGKILL if that takes over 90 s."""
    producer.send_signal(signal.SIGTERM)
    try:
        return producer.wait(90)
    except subprocess.TimeoutExpired:
        producer.kill()
        return producer.wait()


@pytest.mark.parametrize("acks", ["1", "all"])
def test_kill_9_under_load_keeps_every_acknowledged_record(
    make_broker, unique_topic: str, tmp_path: Path, acks: str
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    acks_path = tmp_path / "acks.txt"
    producer = start_producer(broker.bootstrap, unique_topic, acks, acks_path)
    try:
        wait_for_acks(acks_path, rng.randrange(200, 3000), producer)
        time.sleep(rng.uniform(0, 0.3))
        broker.kill()
        acked_before_crash = {value for _, value in read_acks(acks_path)}
        time.sleep(0.5)
        broker.start()
        wait_for_acks(acks_path, len(acked_before_crash) + 500, producer)
    finally:
        producer_exit = stop_producer(producer)
    assert producer_exit == 0, f"producer did not flush and exit cleanly (seed {seed})\n" + exit_report(
        None, stderr_path(acks_path)
    )

    acks_all = read_acks(acks_path)
    with wire.Connection(broker.bootstrap) as conn:
        records = conn.read_all(unique_topic)
    values = [r.value for r in records]
    assert [r.offset for r in records] == list(range(len(records))), f"offsets not dense (seed {seed})"
    lost = [(offset, value) for offset, value in acks_all if offset >= len(values) or values[offset] != value]
    assert not lost, f"acknowledged records missing or moved (seed {seed}): {lost[:5]}"
    duplicated = {v for v, n in collections.Counter(values).items() if n > 1}
    assert not duplicated & acked_before_crash, f"acknowledged records duplicated (seed {seed})"


def produce_batches(bootstrap: str, topic: str, batches: int, per_batch: int = 5) -> list[wire.Record]:
    """Produce `batches` acknowledged batches one by one and return the log as read back."""
    with wire.Connection(bootstrap) as conn:
        for b in range(batches):
            batch = wire.record_batch([(b"b%d" % b, b"r%d-%d" % (b, i) * 8) for i in range(per_batch)])
            assert conn.produce(topic, 0, batch).error_code == 0
        records = conn.read_all(topic)
    assert len(records) == batches * per_batch
    return records


def partition_dir(broker: BrokerProcess, topic: str) -> Path:
    return broker.data_dir / f"{topic}-0"


def active_segment(broker: BrokerProcess, topic: str) -> Path:
    return max(partition_dir(broker, topic).glob("*.log"))


def assert_log_continues(broker: BrokerProcess, topic: str, expected: list[wire.Record]) -> None:
    """The log reads back exactly as `expected` and the next append lands right after it."""
    with wire.Connection(broker.bootstrap) as conn:
        assert conn.read_all(topic) == expected
        assert conn.list_offsets(topic, 0, -1) == (0, len(expected))
        appended = conn.produce(topic, 0, wire.record_batch([(b"after", b"restart")]))
        assert appended.error_code == 0 and appended.base_offset == len(expected)
        tail = conn.read_all(topic, start=len(expected))
    assert [(r.offset, r.key, r.value) for r in tail] == [(len(expected), b"after", b"restart")]


def test_torn_tail_is_truncated_on_restart(make_broker, unique_topic: str) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    records = produce_batches(broker.bootstrap, unique_topic, 40)
    broker.kill()

    segment = active_segment(broker, unique_topic)
    os.truncate(segment, segment.stat().st_size - 7)  # cut into the last batch
    broker.start()

    assert_log_continues(broker, unique_topic, records[:-5])


def test_garbage_after_last_batch_is_dropped_on_restart(make_broker, unique_topic: str) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    records = produce_batches(broker.bootstrap, unique_topic, 40)
    broker.kill()

    with open(active_segment(broker, unique_topic), "ab") as segment:
        segment.write(
            wire.corrupt_crc(wire.record_batch([(b"torn", b"never acknowledged")], base_offset=200))
        )
        segment.write(random.Random(7).randbytes(300))
    broker.start()

    assert_log_continues(broker, unique_topic, records)


def test_deleted_indexes_are_rebuilt(make_broker, unique_topic: str) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic, config={"segment.bytes": "4096"})
    records = produce_batches(broker.bootstrap, unique_topic, 120)
    assert broker.stop() == 0, broker.output_tail()

    directory = partition_dir(broker, unique_topic)
    assert len(list(directory.glob("*.log"))) >= 5
    for index in [*directory.glob("*.index"), *directory.glob("*.timeindex")]:
        index.unlink()
    broker.start()

    with wire.Connection(broker.bootstrap) as conn:
        for start in (0, 101, 333, len(records) - 1):
            assert conn.read_all(unique_topic, start=start) == records[start:]
    assert_log_continues(broker, unique_topic, records)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint file: version line, entry count, then `topic partition offset`."""
    version, count, *entries = path.read_text().splitlines()
    assert version == "0" and int(count) == len(entries)
    return {(topic, int(partition)): int(offset) for topic, partition, offset in map(str.split, entries)}


def test_sigterm_is_a_clean_shutdown(make_broker, unique_topic: str) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    records = produce_batches(broker.bootstrap, unique_topic, 10)

    assert broker.stop() == 0, broker.output_tail()

    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    recovery_points = read_checkpoint(broker.data_dir / "recovery-point-offset-checkpoint")
    assert recovery_points[(unique_topic, 0)] == len(records)
    broker.start()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    assert_log_continues(broker, unique_topic, records)
