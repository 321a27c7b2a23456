"""`odradek delete-records` and `odradek log-dirs` through the entry point, with the broker APIs behind
them (DeleteRecords, DescribeLogDirs), against a broker process.

Effects are read with confluent-kafka (low watermarks, what a consumer gets) and from the broker's
log directory on disk (partition sizes); a restart must keep the deleted records deleted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

QUIET = {"log_level": 3}
NOT_SERVING_YET = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE}


def create_topic(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=60)


def produce(bootstrap: str, topic: str, counts: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for partition, count in enumerate(counts):
        for i in range(count):
            producer.produce(topic, b"v%d" % i, b"k%d" % i, partition)
    assert producer.flush(30) == 0


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) of the partition, once it serves: a restarted broker answers NOT_LEADER_OR_FOLLOWER
    (retriable) for a partition whose log it has not loaded yet, and librdkafka does not retry here."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", **QUIET})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            except KafkaException as exc:
                if exc.args[0].code() not in NOT_SERVING_YET or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def first_offset(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "first", "auto.offset.reset": "earliest", **QUIET}
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])  # below the log start: reset to earliest
        (message,) = consumer.consume(1, timeout=30)
        return message.offset()
    finally:
        consumer.close()


def offsets_file(tmp_path: Path, entries: list[tuple[str, int, int]]) -> str:
    path = tmp_path / "offsets.json"
    partitions = [{"topic": t, "partition": p, "offset": o} for t, p, o in entries]
    path.write_text(json.dumps({"partitions": partitions, "version": 1}))
    return str(path)


def test_delete_records_moves_the_log_start(tool_broker, unique_topic: str, tmp_path: Path) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    produce(bootstrap, unique_topic, [10, 4])
    plan = offsets_file(tmp_path, [(unique_topic, 0, 6), (unique_topic, 1, -1)])
    out = ok("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan)
    assert out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {unique_topic}-0\tlow_watermark: 6",
        f"partition: {unique_topic}-1\tlow_watermark: 4",
    ]
    assert (watermarks(bootstrap, unique_topic, 0), watermarks(bootstrap, unique_topic, 1)) == (
        (6, 10),
        (4, 4),
    )
    assert first_offset(bootstrap, unique_topic, 0) == 6

    tool_broker.restart()
    assert watermarks(bootstrap, unique_topic, 0) == (6, 10)


def test_delete_records_errors_per_partition(tool_broker, unique_topic: str, tmp_path: Path) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 1)
    compacted = f"{unique_topic}-compacted"
    create_topic(bootstrap, compacted, 1, **{"cleanup.policy": "compact"})
    produce(bootstrap, unique_topic, [3])
    plan = offsets_file(tmp_path, [(unique_topic, 0, 4), (compacted, 0, 0), (f"{unique_topic}-none", 0, 1)])
    done = run_odradek("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan)
    assert done.returncode == 1, exit_report(done)
    assert done.stdout.splitlines()[2:] == [
        f"partition: {unique_topic}-0\terror: OFFSET_OUT_OF_RANGE",
        f"partition: {compacted}-0\terror: POLICY_VIOLATION",
        f"partition: {unique_topic}-none-0\terror: UNKNOWN_TOPIC_OR_PARTITION",
    ]
    assert watermarks(bootstrap, unique_topic, 0) == (0, 3)

    twice = offsets_file(tmp_path, [(unique_topic, 0, 1), (unique_topic, 0, 2)])
    refused = run_odradek("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", twice)
    assert (refused.returncode, refused.stdout) == (1, ""), exit_report(refused)
    assert (
        refused.stderr == f"Error: Offset json file contains duplicate topic partitions: {unique_topic}-0\n"
    )


def test_log_dirs_describes_the_partitions_on_disk(tool_broker, unique_topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    produce(bootstrap, unique_topic, [5, 2])
    lines = ok(
        "log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", unique_topic
    ).splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1",
    ]
    data_dir = tool_broker.data_dir.resolve()
    sizes = [
        sum(f.stat().st_size for f in (data_dir / f"{unique_topic}-{p}").glob("*.log")) for p in range(2)
    ]
    assert sizes[0] > sizes[1] > 0
    assert json.loads(lines[2]) == {
        "brokers": [
            {
                "broker": 1,
                "logDirs": [
                    {
                        "partitions": [
                            {
                                "partition": f"{unique_topic}-{p}",
                                "size": sizes[p],
                                "offsetLag": 0,
                                "isFuture": False,
                            }
                            for p in range(2)
                        ],
                        "error": None,
                        "logDir": str(data_dir),
                    }
                ],
            }
        ],
        "version": 1,
    }
    assert lines[2].startswith('{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":')


def test_log_dirs_refuses_an_unknown_broker(tool_broker) -> None:
    done = run_odradek(
        "log-dirs", "--bootstrap-server", tool_broker.bootstrap, "--describe", "--broker-list", "1,7"
    )
    assert done.returncode == 1, exit_report(done)
    assert done.stderr == (
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 1\n"
    )
