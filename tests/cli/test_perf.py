"""`odradek producer-perf-test` and `consumer-perf-test` through the entry point against a broker process.

The lines must be Kafka's (checked field by field with patterns); the records sent must be on the
broker (its high watermark, read with confluent-kafka) and the throughput limit must hold.
"""

from __future__ import annotations

import re
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

QUIET = {"log_level": 3}
NUMBER = r"(\d+(?:\.\d+)?)"
TOTAL = re.compile(
    r"(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\."
)
WINDOW = re.compile(
    r"(\d+) records sent, (\d+\.\d) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d) ms avg latency, "
    r"(\d+\.\d) ms max latency\."
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
HEADER_TAIL = (
    "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "perf-check", **QUIET})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)
        )
    finally:
        consumer.close()


def produce_perf(bootstrap: str, topic: str, records: int, throughput: int, *extra: str) -> list[str]:
    return ok("producer-perf-test", "--topic", topic, "--num-records", str(records), "--record-size", "100",
              "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={bootstrap}", *extra
              ).splitlines()  # fmt: skip


def test_producer_perf_test_sends_and_reports(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 2)
    (line,) = produce_perf(tool_broker.bootstrap, unique_topic, 20000, -1, "acks=1")
    total = TOTAL.fullmatch(line)
    assert total, line
    count, rate, mb, avg, worst, p50, p95, p99, p999 = (float(g) for g in total.groups())
    assert count == 20000 and rate > 0 and p50 <= p95 <= p99 <= p999 <= worst and avg <= worst
    assert abs(mb - rate * 100 / 1024 / 1024) < 0.01
    assert end_offsets(tool_broker.bootstrap, unique_topic, 2) == 20000


def test_producer_perf_test_throttles_and_prints_progress(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 1)
    started = time.monotonic()
    *windows, last = produce_perf(tool_broker.bootstrap, unique_topic, 1500, 250)
    elapsed = time.monotonic() - started
    assert elapsed >= 5.5  # 1500 records at 250 a second take 6 s
    assert windows and all(WINDOW.fullmatch(w) for w in windows), windows
    assert all(float(WINDOW.fullmatch(w)[2]) < 250 * 1.15 for w in windows)
    assert sum(int(WINDOW.fullmatch(w)[1]) for w in windows) < 1500
    assert TOTAL.fullmatch(last) and last.startswith("1500 records sent, ")
    assert end_offsets(tool_broker.bootstrap, unique_topic, 1) == 1500


def consumer_perf(bootstrap: str, topic: str, *args: str) -> list[str]:
    return ["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, *args]


def test_consumer_perf_test_reads_and_reports(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 2)
    produce_perf(tool_broker.bootstrap, unique_topic, 5000, -1)
    done = run_odradek(*consumer_perf(tool_broker.bootstrap, unique_topic, "--messages", "5000",
                                      "--reporting-interval", "100"))  # fmt: skip
    assert done.returncode == 0, exit_report(done)
    header, line = done.stdout.splitlines()
    assert header == f"start.time, end.time, {HEADER_TAIL}fetch.MB.sec, fetch.nMsg.sec"
    match = re.fullmatch(
        rf"({DATE}), ({DATE}), {NUMBER}, {NUMBER}, (\d+), {NUMBER}, (\d+), (\d+), {NUMBER}, {NUMBER}", line
    )
    assert match, line
    assert float(match[3]) == round(5000 * 100 / 1024 / 1024, 4) and match[5] == "5000"
    assert done.stderr.splitlines()[-1].startswith("odradek consumer-perf-test: 5000/5000 records (")


def test_consumer_perf_test_detailed_stats_and_timeout(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 1)
    produce_perf(tool_broker.bootstrap, unique_topic, 300, -1)
    out = ok("consumer-perf-test", "--bootstrap-server", tool_broker.bootstrap, "--topic", unique_topic,
             "--messages", "1000", "--timeout", "2000", "--show-detailed-stats",
             "--reporting-interval", "500")  # fmt: skip
    header, *lines, warning = out.splitlines()
    assert header == f"time, threadId, {HEADER_TAIL}fetch.MB.sec, fetch.nMsg.sec"
    assert lines and all(re.fullmatch(rf"{DATE}, 0, {NUMBER}, {NUMBER}, (\d+), .*", x) for x in lines), lines
    assert lines[-1].split(", ")[4] == "300"
    assert warning == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (2000 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )
