"""Transactional produce throughput against the idempotent producer, on one broker in the same run.

One `odradek serve` process on a fresh directory and one topic of --partitions partitions; a
confluent-kafka producer in this process writes --records records of --size bytes round-robin over
the partitions, acks=all, linger.ms 5:
- idempotent: enable.idempotence, one flush at the end;
- transactional, N records per transaction (100 and 10,000 by default): begin, N records, commit
  (commit_transaction flushes, then EndTxn; the coordinator writes a marker to every partition).
Each is timed, once the producer knows the partitions' leaders (and, transactional, holds its
producer id), from the first produce to the last acknowledgement (the last commit answered), and
prints records/s, MB/s and, for transactions, transactions/s; then a read_committed consumer checks
that every committed record is there (the count must match).

Run `python bench/transactions.py [--records 200000] [--size 100] [--partitions 6]
[--per-transaction 100,10000]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import BrokerProcess

QUIET = {"log_level": 3}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def idempotent(bootstrap: str, topic: str, args: argparse.Namespace) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **QUIET})
    producer.list_topics(topic, timeout=30)  # leaders known before the clock starts
    value = b"x" * args.size
    began = time.perf_counter()
    for i in range(args.records):
        _produce(producer, topic, value, i % args.partitions)
    assert producer.flush(120) == 0
    return time.perf_counter() - began


def transactional(bootstrap: str, topic: str, args: argparse.Namespace, per_txn: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{per_txn}", "linger.ms": 5, **QUIET}
    )
    producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)
    value = b"x" * args.size
    began = time.perf_counter()
    for start in range(0, args.records, per_txn):
        producer.begin_transaction()
        for i in range(start, min(start + per_txn, args.records)):
            _produce(producer, topic, value, i % args.partitions)
        producer.commit_transaction(120)
    return time.perf_counter() - began


def _produce(producer: Producer, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records a read_committed consumer sees, reading to the end of every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-check-{topic}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, ended = 0, set()
    while len(ended) < partitions:
        for message in consumer.consume(10_000, 5):
            if message.error():
                ended.add(message.partition())
            else:
                count += 1
    consumer.close()
    return count


def report(name: str, seconds: float, args: argparse.Namespace, per_txn: int | None) -> None:
    rate = args.records / seconds
    line = f"  {name:28} {rate:9.0f} records/s {rate * args.size / 1e6:7.1f} MB/s"
    if per_txn:
        line += f" {rate / per_txn:8.1f} transactions/s"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--per-transaction", default="100,10000")
    args = parser.parse_args()
    sizes = [int(n) for n in args.per_transaction.split(",")]
    with tempfile.TemporaryDirectory() as root, BrokerProcess(Path(root) / "data") as broker:
        print(f"{args.records} records of {args.size} bytes over {args.partitions} partitions, acks=all")
        runs: list[tuple[str, int | None]] = [
            ("idempotent", None),
            *((f"transactions of {n}", n) for n in sizes),
        ]
        for name, per_txn in runs:
            topic = f"bench-{per_txn or 'idempotent'}"
            create_topic(broker.bootstrap, topic, args.partitions)
            if per_txn is None:
                seconds = idempotent(broker.bootstrap, topic, args)
            else:
                seconds = transactional(broker.bootstrap, topic, args, per_txn)
            report(name, seconds, args, per_txn)
            seen = committed_count(broker.bootstrap, topic, args.partitions)
            assert seen == args.records, f"{name}: read_committed saw {seen} of {args.records}"


if __name__ == "__main__":
    main()
