"""Helpers shared by the Spark tests: producing with confluent-kafka, reading back, waiting."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer
from confluent_kafka import KafkaError as CkError
from confluent_kafka import TopicPartition as CkTopicPartition

from odradek.client import KafkaClient, TopicPartition

RETAIN_LITTLE = {"segment.bytes": "1024", "retention.bytes": "1"}
"""Topic configs under which retention soon deletes every segment but the active one."""


@dataclass(frozen=True, slots=True)
class Produced:
    """One record as a plain Kafka client wrote or read it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int = 0


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    headers: Callable[[int], list[tuple[str, bytes | None]]] | None = None,
    timestamp_ms: Callable[[int], int] | None = None,
) -> list[Produced]:
    """Produce (partition, key, value) records with confluent-kafka; return them with their offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    delivered: list[Produced] = []
    errors: list[object] = []

    def on_delivery(sent_headers: tuple, err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
            return
        delivered.append(
            Produced(
                msg.partition(),  # type: ignore[attr-defined]
                msg.offset(),  # type: ignore[attr-defined]
                msg.key(),  # type: ignore[attr-defined]
                msg.value(),  # type: ignore[attr-defined]
                sent_headers,
                msg.timestamp()[1],  # type: ignore[attr-defined]
            )
        )

    for i, (partition, key, value) in enumerate(records):
        extra: dict[str, object] = {}
        record_headers = tuple(headers(i)) if headers is not None else ()
        if record_headers:
            extra["headers"] = list(record_headers)
        if timestamp_ms is not None:
            extra["timestamp"] = timestamp_ms(i)
        callback = functools.partial(on_delivery, record_headers)
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=callback, **extra)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return sorted(delivered, key=lambda r: (r.partition, r.offset))


def consume_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[Produced]:
    """Every record of `topic` from the beginning to the current end, read by confluent-kafka."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Produced] = []
        deadline = time.monotonic() + timeout_s
        while sum(1 for r in records) < sum(ends.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            records.append(
                Produced(
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def consume_committed(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0, *, partial: bool = False
) -> list[Produced]:
    """Every record of `topic` a read_committed confluent-kafka consumer sees, up to each partition's
    end once no transaction is open there (records of aborted transactions are left out). A topic
    still unstable after `timeout_s` fails, unless `partial`: then what was seen is returned."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-committed-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Produced] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                if partial:
                    break
                raise AssertionError(f"{topic} did not become stable within {timeout_s}s")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == CkError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            records.append(
                Produced(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()))
            )
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def assert_one_line(error: BaseException, message: str) -> None:
    """The error reached the user with `message` on one line of its text, and no Python traceback."""
    text = str(error)
    assert any(message in line for line in text.splitlines()), text
    assert "Traceback" not in text, text


def wait_until(
    condition: Callable[[], bool], timeout_s: float = 60.0, what: str = "condition", poll_s: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)


def wait_for_log_start(client: KafkaClient, tp: TopicPartition) -> int:
    """Wait until retention moved the log start offset of `tp` past 0 and left it there; return it."""
    seen: list[int] = []

    def settled() -> bool:
        seen.append(client.list_offsets({tp: -2})[tp])
        return len(seen) >= 3 and seen[-1] > 0 and seen[-1] == seen[-3]

    wait_until(settled, 30, f"retention on {tp}")
    return seen[-1]
