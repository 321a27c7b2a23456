"""`odradek consumer-perf-test`: kafka-consumer-perf-test.sh, with its flags and its output.

    odradek consumer-perf-test --bootstrap-server H:P (--topic T | --include REGEX) --messages N
        [--group G] [--from-latest] [--fetch-size BYTES] [--timeout MS] [--show-detailed-stats
        [--reporting-interval MS]] [--date-format JAVA_FORMAT] [--hide-header] [--consumer.config FILE]

Reads N records in a consumer group (`perf-consumer-NNNNN` unless --group is given) and prints, as
Kafka 3.9's ConsumerPerformance does, the header `start.time, end.time, data.consumed.in.MB, MB.sec,
data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec` and
one line of those values at the end; with --show-detailed-stats, the header starting `time, threadId`
and one such line per --reporting-interval instead. Without detailed stats a progress line goes to
stderr per reporting interval (`odradek consumer-perf-test: ... N/M records (R records/s)`). When no
record comes for --timeout ms, Kafka's `WARNING: Exiting before consuming the expected number of
messages: ...` line is printed and the run ends with what it read. Bytes are keys plus values; the
rebalance time is the wait for the first assignment. --date-format takes Java's SimpleDateFormat
letters yyyy MM dd HH mm ss SSS. --threads, --num-fetch-threads and --print-metrics are not supported.

The consumer is librdkafka's (odradek.cli.librdkafka).
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Consumer

from odradek.cli.common import ToolError, guarded
from odradek.cli.librdkafka import client_config, librdkafka_errors
from odradek.cli.progress import Progress
from odradek.client import bootstrap_option

COMMAND = "consumer-perf-test"
HELP = "measure consumer throughput (kafka-consumer-perf-test)"

MIB = 1024 * 1024
POLL_S = 0.1
BATCH = 500
DEFAULT_DATE_FORMAT = "yyyy-MM-dd HH:mm:ss:SSS"
EXTENDED_HEADER = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
_JAVA_DATE = [("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", type=bootstrap_option, metavar="HOST:PORT[,HOST:PORT...]")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", help="the topic to read")
    source.add_argument("--include", metavar="REGEX", help="the topics to read")
    parser.add_argument("--messages", type=int, required=True, help="how many records to read")
    parser.add_argument("--group", help="the consumer group (default perf-consumer-NNNNN)")
    parser.add_argument("--from-latest", action="store_true", help="start at the end of the log (new group)")
    parser.add_argument("--fetch-size", type=int, default=1024 * 1024, help="bytes per partition per fetch")
    parser.add_argument("--timeout", type=int, default=10_000, metavar="MS", help="longest wait for a record")
    parser.add_argument("--show-detailed-stats", action="store_true", help="a line per reporting interval")
    parser.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    parser.add_argument("--date-format", default=DEFAULT_DATE_FORMAT, help="Java SimpleDateFormat letters")
    parser.add_argument("--hide-header", action="store_true", help="leave out the header line")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer settings")


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        config = client_config(
            COMMAND,
            args.bootstrap_server,
            args.consumer_config,
            [],
            {
                "group.id": args.group or f"perf-consumer-{random.randrange(100_000)}",
                "auto.offset.reset": "latest" if args.from_latest else "earliest",
                "max.partition.fetch.bytes": args.fetch_size,
                "enable.auto.commit": True,
            },
        )
        if args.group:
            config["group.id"] = args.group
        with librdkafka_errors():
            consumer = Consumer(config)
            try:
                _measure(consumer, args)
            finally:
                consumer.close()
        return 0

    if args.messages <= 0:
        raise ToolError("Error: --messages must be positive")
    return guarded(COMMAND, body)


@dataclass
class Totals:
    messages: int = 0
    bytes: int = 0
    join_ms: float = 0.0


Window = tuple[float, int, int, float]  # its start (ms), and the messages, bytes and join time before it


def _measure(consumer: Consumer, args: argparse.Namespace) -> None:
    totals = Totals()
    subscribed_ms = time.time() * 1000

    def assigned(_consumer: Consumer, _partitions: list) -> None:
        totals.join_ms += time.time() * 1000 - subscribed_ms

    consumer.subscribe([args.topic] if args.topic else [f"^{args.include}"], on_assign=assigned)
    if not args.hide_header:
        first = "time, threadId" if args.show_detailed_stats else "start.time, end.time"
        print(f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{EXTENDED_HEADER}")
    start_ms = time.time() * 1000
    _read(consumer, args, totals, start_ms)
    end_ms = time.time() * 1000
    if not args.show_detailed_stats:
        _print_summary(args.date_format, start_ms, end_ms, totals)


def _read(consumer: Consumer, args: argparse.Namespace, totals: Totals, start_ms: float) -> None:
    progress = Progress(f"odradek {COMMAND}:", args.messages, "records", threshold=0,
                        every_s=args.reporting_interval / 1000)  # fmt: skip
    last_seen = last_report = time.monotonic()
    window: Window = (start_ms, 0, 0, 0.0)
    while totals.messages < args.messages:
        now = time.monotonic()
        if (now - last_seen) * 1000 >= args.timeout:
            print(
                "WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the timeout."
            )
            return
        messages = consumer.consume(min(BATCH, args.messages - totals.messages), POLL_S)
        good = [m for m in messages if m.error() is None]
        totals.messages += len(good)
        totals.bytes += sum(len(m.key() or b"") + len(m.value() or b"") for m in good)
        if good:
            last_seen = now
            if not args.show_detailed_stats:
                progress.advance(len(good))
        if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
            window = _print_window(args.date_format, window, totals)
            last_report = now


def _print_window(
    date_format: str, window: tuple[float, int, int, float], totals: Totals
) -> tuple[float, int, int, float]:
    """One detailed line for the window since `window`; the next window's start."""
    start_ms, messages_before, bytes_before, join_before = window
    end_ms = time.time() * 1000
    elapsed = max(end_ms - start_ms, 1e-9)
    join_ms = totals.join_ms - join_before
    fetch_ms = end_ms - start_ms - join_ms
    mb, window_mb = totals.bytes / MIB, (totals.bytes - bytes_before) / MIB
    window_messages = totals.messages - messages_before
    fetch_mb_s = 0.0 if fetch_ms <= 0 else 1000 * window_mb / fetch_ms
    fetch_msg_s = 0.0 if fetch_ms <= 0 else 1000 * window_messages / fetch_ms
    print(
        f"{_date(date_format, end_ms)}, 0, {mb:.4f}, {1000 * window_mb / elapsed:.4f}, {totals.messages}, "
        f"{1000 * window_messages / elapsed:.4f}, {int(join_ms)}, {int(fetch_ms)}, {fetch_mb_s:.4f}, "
        f"{fetch_msg_s:.4f}",
        flush=True,
    )
    return end_ms, totals.messages, totals.bytes, totals.join_ms


def _print_summary(date_format: str, start_ms: float, end_ms: float, totals: Totals) -> None:
    elapsed_s = max(end_ms - start_ms, 1e-9) / 1000
    fetch_s = (end_ms - start_ms - totals.join_ms) / 1000
    mb = totals.bytes / MIB
    fetch_mb_s = mb / fetch_s if fetch_s > 0 else 0.0
    fetch_msg_s = totals.messages / fetch_s if fetch_s > 0 else 0.0
    print(
        f"{_date(date_format, start_ms)}, {_date(date_format, end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, "
        f"{totals.messages}, {totals.messages / elapsed_s:.4f}, {int(totals.join_ms)}, "
        f"{int(end_ms - start_ms - totals.join_ms)}, {fetch_mb_s:.4f}, {fetch_msg_s:.4f}"
    )


def _date(java_format: str, epoch_ms: float) -> str:
    """`epoch_ms` in local time, written with Java SimpleDateFormat letters."""
    moment = datetime.fromtimestamp(epoch_ms / 1000)
    text = java_format.replace("SSS", f"{int(epoch_ms) % 1000:03d}")
    for java, python in _JAVA_DATE:
        text = text.replace(java, python)
    return moment.strftime(text)
