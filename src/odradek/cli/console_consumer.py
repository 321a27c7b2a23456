"""`odradek console-consumer`: kafka-console-consumer.sh, records to stdout.

    odradek console-consumer --bootstrap-server H:P (--topic T | --include REGEX) [--from-beginning]
        [--group G] [--partition P [--offset earliest|latest|N]] [--max-messages N] [--timeout-ms MS]
        [--property print.key=true ...] [--consumer-property k=v ...] [--consumer.config FILE]
        [--isolation-level read_uncommitted|read_committed]

Records are written as Kafka's DefaultMessageFormatter writes them: the raw value bytes, preceded
(in this order, each followed by key.separator, default TAB) by `CreateTime:MS` (print.timestamp),
`Partition:P` (print.partition), `Offset:N` (print.offset), `h:v,h2:v2` or `NO_HEADERS`
(print.headers, headers.separator), the key (print.key); null keys and values print as null.literal
(`null`); print.value=false leaves the value out; line.separator ends each record. On exit
`Processed a total of N messages` goes to stderr, as Kafka prints it, also after Ctrl-C or when
--timeout-ms passes without a record (exit status 0, where Kafka also logs the timeout as an ERROR).

Without --group the consumer joins a group of its own, `console-consumer-NNNNN`, without committing,
as Kafka's does; with --partition it reads that partition from --offset (default latest, earliest
with --from-beginning) without a subscription, once the topic is found to have it (else one line,
`Error: Topic T has no partition P: its partitions are 0 to N` or `Error: Topic T not found.`, and
exit status 1, where Kafka's waits without end). The consumer is librdkafka's (odradek.cli.librdkafka).

Errors the consumer reports while it waits (a subscribed topic that does not exist yet, a broker
gone) are not records: each distinct one is a line on stderr (`odradek console-consumer: ...`),
not counted, and the wait goes on as Kafka's does (a fatal error ends it: one line, exit status 1).

Deliberate deviation: the consumer never creates a topic (librdkafka's allow.auto.create.topics=false,
unless --consumer-property sets it), where Java's consumer asks the broker to auto-create a topic it
subscribes to: a typo in --topic must not leave a topic behind.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from odradek.cli.common import ToolError, guarded
from odradek.cli.librdkafka import add_client_options, client_config, librdkafka_errors
from odradek.cli.main import UsageError

COMMAND = "console-consumer"
HELP = "print the records of a topic (kafka-console-consumer)"

POLL_S = 0.2
METADATA_TIMEOUT_S = 10.0
TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """DefaultMessageFormatter's properties."""

    timestamp: bool
    partition: bool
    offset: bool
    headers: bool
    key: bool
    value: bool
    key_separator: bytes
    line_separator: bytes
    headers_separator: bytes
    null_literal: bytes

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormat:
        def flag(name: str, default: str = "false") -> bool:
            return props.get(name, default).strip().lower() == "true"

        return cls(
            timestamp=flag("print.timestamp"),
            partition=flag("print.partition"),
            offset=flag("print.offset"),
            headers=flag("print.headers"),
            key=flag("print.key"),
            value=flag("print.value", "true"),
            key_separator=_unescaped(props.get("key.separator", "\t")),
            line_separator=_unescaped(props.get("line.separator", "\n")),
            headers_separator=_unescaped(props.get("headers.separator", ",")),
            null_literal=props.get("null.literal", "null").encode(),
        )

    def render(self, message: Message) -> bytes:
        fields = []
        if self.timestamp:
            kind, stamp = message.timestamp()
            fields.append(
                f"{TIMESTAMP_TYPES[kind]}:{stamp}".encode() if kind in TIMESTAMP_TYPES else b"NO_TIMESTAMP"
            )
        if self.partition:
            fields.append(b"Partition:%d" % message.partition())
        if self.offset:
            fields.append(b"Offset:%d" % message.offset())
        if self.headers:
            fields.append(self._headers(message.headers()))
        if self.key:
            fields.append(self._nullable(message.key()))
        if self.value:
            fields.append(self._nullable(message.value()))
        return self.key_separator.join(fields) + self.line_separator

    def _headers(self, headers: list[tuple[str, bytes | None]] | None) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            name.encode() + b":" + self._nullable(value) for name, value in headers
        )

    def _nullable(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data


def _unescaped(text: str) -> bytes:
    """Kafka reads `\\t`, `\\n` typed on a command line as the characters they name."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r").encode()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", help="the topic to read")
    source.add_argument("--include", "--whitelist", dest="include", metavar="REGEX", help="topics to read")
    parser.add_argument("--partition", type=int, help="read only this partition (no group subscription)")
    parser.add_argument("--offset", default=None, help="with --partition: earliest, latest or an offset")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--group", help="the consumer group (default: a new group of its own)")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--timeout-ms", type=int, help="stop when no record comes for this long")
    add_client_options(
        parser,
        "consumer",
        "--property",
        property_help="a formatter property (print.key, print.timestamp, ...)",
    )
    parser.add_argument(
        "--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted"
    )
    parser.add_argument("--skip-message-on-error", action="store_true", help="accepted; nothing to skip")


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    record_format = RecordFormat.from_properties(dict(args.property))

    def body() -> int:
        with librdkafka_errors():
            consumer = Consumer(_config(args))
            try:
                if args.partition is not None:
                    _check_partition(consumer, args.topic, args.partition)
                _start(consumer, args)
                _consume(consumer, record_format, args.max_messages, args.timeout_ms)
            finally:
                consumer.close()
        return 0

    return guarded(COMMAND, body)


def _check_usage(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if args.partition is not None and args.include is not None:
        raise UsageError("--partition goes with --topic, not --include")
    if args.offset not in (None, "earliest", "latest") and not args.offset.lstrip("-").isdigit():
        raise UsageError(f"--offset must be earliest, latest or a number, not {args.offset!r}")


def _config(args: argparse.Namespace) -> dict[str, object]:
    defaults: dict[str, object] = {
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.partition.eof": False,
        "allow.auto.create.topics": False,  # reading never creates a topic (see the header)
    }
    config = client_config(
        COMMAND, args.bootstrap_server, args.consumer_config, args.consumer_property, defaults
    )
    if args.group is not None:
        config["group.id"] = args.group
    if "group.id" not in config:
        config["group.id"] = f"console-consumer-{random.randrange(100_000)}"
        config.setdefault("enable.auto.commit", False)
    return config


def _check_partition(consumer: Consumer, topic: str, partition: int) -> None:
    """ToolError unless `topic` has `partition` (an assigned partition that does not exist is
    otherwise waited for in silence)."""
    found = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise ToolError(f"Error: Topic {topic} not found.")
    _raise_for(found.error)
    if partition not in found.partitions:
        last = len(found.partitions) - 1
        raise ToolError(f"Error: Topic {topic} has no partition {partition}: its partitions are 0 to {last}")


def _start(consumer: Consumer, args: argparse.Namespace) -> None:
    if args.partition is not None:
        offset = {None: OFFSET_BEGINNING if args.from_beginning else OFFSET_END, "earliest": OFFSET_BEGINNING,
                  "latest": OFFSET_END}.get(args.offset)  # fmt: skip
        consumer.assign(
            [TopicPartition(args.topic, args.partition, int(args.offset) if offset is None else offset)]
        )
    else:
        consumer.subscribe([args.topic] if args.topic is not None else [f"^{args.include}"])


def _consume(
    consumer: Consumer, record_format: RecordFormat, limit: int | None, timeout_ms: int | None
) -> None:
    count = 0
    out = sys.stdout.buffer
    reported: set[str] = set()
    idle_since = time.monotonic()
    try:
        while limit is None or count < limit:
            message = consumer.poll(POLL_S)
            if message is not None and message.error() is not None:
                _report(message.error(), reported)
                message = None
            if message is None:
                if timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= timeout_ms:
                    break
                continue
            out.write(record_format.render(message))
            out.flush()
            count += 1
            idle_since = time.monotonic()
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr)


_WAITED_OUT = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


def _report(error: KafkaError, reported: set[str]) -> None:
    """An error the consumer delivered in place of a record: a ToolError if waiting will not cure
    it, else a stderr line the first time it is seen."""
    _raise_for(error)
    if error.str() not in reported:
        reported.add(error.str())
        print(f"odradek {COMMAND}: {error.str()}", file=sys.stderr, flush=True)


def _raise_for(error: KafkaError | None) -> None:
    """A consumer error that waiting will not cure, as a ToolError; a missing topic is waited for."""
    if error is not None and error.code() not in _WAITED_OUT and (error.fatal() or not error.retriable()):
        raise ToolError(f"Error: {error.str()}")
