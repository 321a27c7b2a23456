"""Group members for the cluster and fault tests: a confluent-kafka consumer in its own thread that
processes records in batches and commits each batch synchronously, and the ledger that checks the
group consumed every record exactly once by its committed offsets.

The ledger's rule: a batch counts as processed only once its commit (explicit offsets, the batch's
last offset + 1 per partition) was acknowledged for that partition. A partition whose commit failed
is rolled back: the member stops (closes, committing nothing more) and a replacement starts, so the
partition's next owner reads it again from the committed offset. At the end, for every partition,
the (partition, offset) pairs of the counted batches must be exactly 0 .. committed - 1, each once,
and committed must be the partition's end offset: a record skipped by a commit is a gap, a record
counted by two members (a new owner starting below an acknowledged commit, two owners at once) is a
duplicate, and either fails the check.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.compat.helpers import QUIET

POLL_BATCH = 50


def consumer_config(bootstrap: str, group: str, protocol: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **QUIET,
        **extra,
    }
    if protocol == "classic":
        config.setdefault("session.timeout.ms", 6000)
        config.setdefault("heartbeat.interval.ms", 500)
    return config


class Ledger:
    """Every counted (topic, partition, offset), from every member of one group (thread safe)."""

    def __init__(self) -> None:
        self.counted: Counter[tuple[str, int, int]] = Counter()
        self.values: Counter[tuple[str, bytes]] = Counter()
        self.commit_failures: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, records: Iterable[tuple[str, int, int, bytes]]) -> None:
        with self._lock:
            for topic, partition, offset, value in records:
                self.counted[(topic, partition, offset)] += 1
                self.values[(topic, value)] += 1

    def failed(self, reason: str) -> None:
        with self._lock:
            self.commit_failures[reason] += 1

    def total(self, topic: str) -> int:
        with self._lock:
            return sum(n for (t, _, _), n in self.counted.items() if t == topic)

    def problems(self, topic: str, committed: dict[int, int], end_offsets: dict[int, int]) -> list[str]:
        """The topic's gaps, duplicates and records beyond the committed offsets, and committed
        offsets short of the end. Empty when the group consumed every record exactly once."""
        found: list[str] = []
        with self._lock:
            counted = Counter({(p, o): n for (t, p, o), n in self.counted.items() if t == topic})
        for partition, end in sorted(end_offsets.items()):
            upto = committed.get(partition, -1)
            if upto != end:
                found.append(f"{topic}-{partition}: committed {upto}, end offset {end}")
            for offset in range(max(upto, 0)):
                times = counted.pop((partition, offset), 0)
                if times != 1:
                    found.append(f"{topic}-{partition} offset {offset}: counted {times} times")
        for (partition, offset), times in sorted(counted.items()):
            found.append(f"{topic}-{partition} offset {offset}: counted {times} times past the commit")
        return found[:20]


class Member:
    """One group member in a thread: consume a batch, commit it, count it (see the module)."""

    def __init__(self, name: str, config: dict[str, Any], topics: list[str], ledger: Ledger) -> None:
        self.name = name
        self.config = config
        self.topics = topics
        self.ledger = ledger
        self.batches = 0
        self.rolled_back = False
        self.error: BaseException | None = None
        self.assignment: list[tuple[str, int]] = []
        self.paused = threading.Event()  # set: the member stops polling (a slow member)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60) -> None:
        self._stop.set()
        self.paused.clear()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"member {self.name} did not close"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        consumer = Consumer(self.config)
        try:
            consumer.subscribe(self.topics)
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                messages = [m for m in consumer.consume(POLL_BATCH, 0.2) if m.error() is None]
                self.assignment = [(tp.topic, tp.partition) for tp in consumer.assignment()]
                if messages and not self._commit(consumer, messages):
                    self.rolled_back = True
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, messages: list[Any]) -> bool:
        """Commit the batch; count the partitions whose commit was acknowledged. False when one
        failed (the member must stop: that partition's records are read again by its next owner)."""
        last: dict[tuple[str, int], int] = {}
        for m in messages:
            last[(m.topic(), m.partition())] = max(last.get((m.topic(), m.partition()), -1), m.offset())
        offsets = [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as exc:
            self.ledger.failed(exc.args[0].name())
            return False
        ok = {(tp.topic, tp.partition) for tp in answered if tp.error is None}
        for tp in answered:
            if tp.error is not None:
                self.ledger.failed(tp.error.name() if isinstance(tp.error, KafkaError) else str(tp.error))
        self.ledger.add(
            (m.topic(), m.partition(), m.offset(), m.value() or b"")
            for m in messages
            if (m.topic(), m.partition()) in ok
        )
        self.batches += 1
        return len(ok) == len(offsets)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch from a consumer that never joins)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", **QUIET})
    try:
        return {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        reader.close()


class Crew:
    """The members of one group: started, stopped, and replaced when one rolls back."""

    def __init__(self, name: str, config: dict[str, Any], topics: list[str], ledger: Ledger) -> None:
        self.name = name
        self.config = config
        self.topics = topics
        self.ledger = ledger
        self.members: list[Member] = []
        self.replaced = 0

    def add(self) -> Member:
        member = Member(f"{self.name}-{len(self.members)}", self.config, self.topics, self.ledger)
        self.members.append(member)
        return member.start()

    def running(self) -> list[Member]:
        return [m for m in self.members if m.running and not m.rolled_back]

    def keep(self, count: int) -> None:
        """Start a replacement for each member that rolled back, so `count` run."""
        for _ in range(count - len(self.running())):
            self.replaced += 1
            self.add()

    def retire(self) -> None:
        """Close the oldest running member."""
        self.running()[0].stop()

    def consuming(self, count: int) -> bool:
        """`count` members run (replacing those that rolled back), each with partitions and batches."""
        self.keep(count)
        running = self.running()
        return len(running) == count and all(m.assignment and m.batches for m in running)

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def errors(self) -> list[BaseException]:
        return [m.error for m in self.members if m.error is not None]
