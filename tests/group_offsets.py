"""Consumer groups that commit offsets on several partitions of several topics, with confluent-kafka:
the shape that /metrics' per-group lag must survive (each group's offsets are sorted by partition)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.compat.helpers import QUIET

PARTITIONS = 3
RECORDS_PER_PARTITION = 4


def produce_to_every_partition(bootstrap: str, topics: Iterable[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
    for topic in topics:
        for partition in range(PARTITIONS):
            for i in range(RECORDS_PER_PARTITION):
                producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Join `group` on the offsets' topics, then commit `offsets` for it (synchronously)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET}
    )
    try:
        consumer.subscribe(sorted({topic for topic, _ in offsets}))
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        wanted = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        consumer.commit(offsets=wanted, asynchronous=False)
    finally:
        consumer.close()


def committed_offsets(topics: Iterable[str], shift: int) -> dict[tuple[str, int], int]:
    """A distinct offset per partition of `topics`: partition + 1 + shift (at most the records there)."""
    return {(t, p): min(p + 1 + shift, RECORDS_PER_PARTITION) for t in topics for p in range(PARTITIONS)}


class Rebalancing:
    """Consumers joining and leaving `group` on `topics` in a thread, until stopped: rebalances keep
    coming while a test scrapes."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], rounds: int) -> None:
        self._conf = {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000, **QUIET}
        self._topics = topics
        self._rounds = rounds
        self.finished = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Rebalancing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(60)
        if self.error is not None:
            raise self.error

    def busy(self) -> bool:
        return not self.finished.is_set()

    def _run(self) -> None:
        try:
            for _ in range(self._rounds):
                consumer = Consumer(self._conf)
                consumer.subscribe(self._topics)
                deadline = time.monotonic() + 10
                while not consumer.assignment() and time.monotonic() < deadline:
                    consumer.poll(0.1)
                assigned = [TopicPartition(tp.topic, tp.partition, 1) for tp in consumer.assignment()]
                if assigned:
                    consumer.commit(offsets=assigned, asynchronous=False)
                consumer.close()
        except BaseException as exc:  # handed to the test by __exit__
            self.error = exc
        finally:
            self.finished.set()
