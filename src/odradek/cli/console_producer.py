"""`odradek console-producer`: kafka-console-producer.sh, one record per line of stdin.

    odradek console-producer --bootstrap-server H:P --topic T [--property parse.key=true]
        [--property key.separator=:] [--producer-property k=v ...] [--producer.config FILE]
        [--request-required-acks -1|0|1|all] [--compression-codec [gzip|snappy|lz4|zstd]] [--sync]
        [--batch-size N] [--timeout LINGER_MS] [--request-timeout-ms MS] [--message-send-max-retries N]

The line reader's properties (--property) are Kafka's LineMessageReader's: parse.key and key.separator
(default TAB), parse.headers with headers.delimiter (TAB), headers.separator (',') and
headers.key.separator (':'), null.marker (a key, value or header value equal to it is null) and
ignore.error (a line without the key separator becomes a value with a null key instead of an error).
A line without the separator is otherwise reported as Kafka does (`No key separator found on line
number N: 'LINE'`, exit 1) after the lines before it are sent. Keys go to partitions as Java's
producer puts them (murmur2). A record the cluster refuses is reported in Kafka's words, one line
each, and the exit status is 1. The `>` prompt is shown only when stdin is a terminal.

The producer is librdkafka's (odradek.cli.librdkafka), configured with Kafka's console-producer
defaults (acks=-1, linger.ms=1000, batch.size=16384).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, Producer

from odradek.cli.common import ToolError, guarded
from odradek.cli.librdkafka import add_client_options, client_config, librdkafka_errors

COMMAND = "console-producer"
HELP = "produce the lines of stdin as records (kafka-console-producer)"

FLUSH_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How LineMessageReader cuts a line into headers, key and value."""

    parse_key: bool
    key_separator: bytes
    parse_headers: bool
    headers_delimiter: bytes
    headers_separator: bytes
    header_key_separator: bytes
    null_marker: bytes | None
    ignore_error: bool

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        def text(name: str, default: str) -> bytes:
            return props.get(name, default).encode()

        null_marker = props.get("null.marker")
        return cls(
            parse_key=props.get("parse.key", "false").lower() == "true",
            key_separator=text("key.separator", "\t"),
            parse_headers=props.get("parse.headers", "false").lower() == "true",
            headers_delimiter=text("headers.delimiter", "\t"),
            headers_separator=text("headers.separator", ","),
            header_key_separator=text("headers.key.separator", ":"),
            null_marker=None if null_marker is None else null_marker.encode(),
            ignore_error=props.get("ignore.error", "false").lower() == "true",
        )

    def nullable(self, data: bytes) -> bytes | None:
        return None if data == self.null_marker else data

    def record(
        self, line: bytes, number: int
    ) -> tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None]:
        """(headers, key, value) of line `number` (counted from 1); ToolError on a malformed line."""
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, rest = self._split(line, self.headers_delimiter, "headers delimiter", number)
            headers, line = self._headers(head), rest
        if not self.parse_key:
            return headers, None, self.nullable(line)
        if self.key_separator not in line and self.ignore_error:
            return headers, None, self.nullable(line)
        key, value = self._split(line, self.key_separator, "key separator", number)
        return headers, self.nullable(key), self.nullable(value)

    def _split(self, line: bytes, separator: bytes, what: str, number: int) -> tuple[bytes, bytes]:
        head, found, rest = line.partition(separator)
        if not found:
            shown = line.decode(errors="replace")
            raise ToolError(f"Error: No {what} found on line number {number}: '{shown}'")
        return head, rest

    def _headers(self, text: bytes) -> list[tuple[str, bytes | None]]:
        headers = []
        for item in text.split(self.headers_separator) if text else []:
            name, found, value = item.partition(self.header_key_separator)
            headers.append((name.decode(errors="replace"), self.nullable(value) if found else None))
        return headers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    add_client_options(
        parser,
        "producer",
        "--property",
        "--reader-property",
        property_help="a line reader property (parse.key, ...)",
    )
    parser.add_argument("--request-required-acks", default="-1", help="acks (default -1)")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", help="none, gzip, snappy, lz4, zstd")
    parser.add_argument("--sync", action="store_true", help="send each record on its own, synchronously")
    parser.add_argument("--batch-size", type=int, default=16384, help="bytes per batch (default 16384)")
    parser.add_argument("--timeout", type=int, default=1000, metavar="MS", help="linger.ms (default 1000)")
    parser.add_argument("--request-timeout-ms", type=int, default=1500, metavar="MS")
    parser.add_argument("--message-send-max-retries", type=int, default=3)


def run(args: argparse.Namespace) -> int:
    line_format = LineFormat.from_properties(dict(args.property))

    def body() -> int:
        with librdkafka_errors():
            return _produce(_producer(args), args.topic, line_format, sync=args.sync)

    return guarded(COMMAND, body)


def _producer(args: argparse.Namespace) -> Producer:
    defaults = {
        "acks": args.request_required_acks,
        "linger.ms": 0 if args.sync else args.timeout,
        "batch.size": args.batch_size,
        "request.timeout.ms": args.request_timeout_ms,
        "retries": args.message_send_max_retries,
        "compression.type": args.compression_codec or "none",
        "partitioner": "murmur2_random",  # Java's partitioner for keyed records
    }
    return Producer(
        client_config(COMMAND, args.bootstrap_server, args.producer_config, args.producer_property, defaults)
    )


def _produce(producer: Producer, topic: str, line_format: LineFormat, *, sync: bool) -> int:
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failures.append(_failure_line(topic, message, error))

    try:
        for number, line in enumerate(_lines(), start=1):
            headers, key, value = line_format.record(line, number)
            producer.produce(topic, value=value, key=key, headers=headers or None, on_delivery=delivered)
            producer.flush(FLUSH_TIMEOUT_S) if sync else producer.poll(0)
    finally:
        unsent = producer.flush(FLUSH_TIMEOUT_S)
    for failure in failures:
        print(failure, file=sys.stderr)
    if unsent:
        print(f"Error: {unsent} records were not sent within {FLUSH_TIMEOUT_S:g} s", file=sys.stderr)
    return 1 if failures or unsent else 0


def _lines() -> Iterator[bytes]:
    """stdin's lines without their line ends, with Kafka's `>` prompt when a person is typing."""
    prompt = sys.stdin.isatty()
    while True:
        if prompt:
            print(">", end="", flush=True)
        line = sys.stdin.buffer.readline()
        if not line:
            return
        yield line.removesuffix(b"\n").removesuffix(b"\r")


def _failure_line(topic: str, message: object, error: KafkaError) -> str:
    def size(data: bytes | None) -> str:
        return "null" if data is None else f"{len(data)} bytes"

    key, value = message.key(), message.value()  # type: ignore[attr-defined]
    return (
        f"Error when sending message to topic {topic} with key: {size(key)}, value: {size(value)} "
        f"with error: {error.str()}"
    )
