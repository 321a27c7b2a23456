"""`odradek log-dirs`: kafka-log-dirs.sh, with its flags and its output.

    odradek log-dirs --bootstrap-server H:P --describe [--broker-list 1,2] [--topic-list t1,t2]

Asks each broker (all of them, or --broker-list) for its log directories (DescribeLogDirs) and prints,
as Kafka 3.9's LogDirsCommand does, `Querying brokers for log directories information`, `Received log
directory information from brokers 1,2` and one JSON line:
`{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":N,"offsetLag":0,
"isFuture":false}],"error":null,"logDir":"/path"}]}],"version":1}` (--topic-list keeps the named
topics' partitions). A directory's error is the Kafka error's name where Kafka prints the Java
exception class. A broker id that is not in the cluster is refused as Kafka does.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from odradek.cli.common import ToolError, add_connection_options, connect, guarded
from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_name
from odradek.protocol.messages import DescribeLogDirsRequest

COMMAND = "log-dirs"
HELP = "describe the brokers' log directories and the partitions in them (kafka-log-dirs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument("--describe", action="store_true", required=True, help="describe the log dirs")
    parser.add_argument("--broker-list", type=_ids, metavar="1,2,...", help="the brokers (default all)")
    parser.add_argument(
        "--topic-list", type=_names, default=[], metavar="T1,T2,...", help="only these topics"
    )


def _ids(text: str) -> list[int]:
    try:
        return [int(i) for i in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 1,2, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        print("Querying brokers for log directories information")
        with connect(args, COMMAND) as client:
            described = _describe(client, args.broker_list, set(args.topic_list))
        print(f"Received log directory information from brokers {','.join(str(b) for b in described)}")
        document = {
            "brokers": [{"broker": b, "logDirs": dirs} for b, dirs in described.items()],
            "version": 1,
        }
        print(json.dumps(document, separators=(",", ":")))
        return 0

    return guarded(COMMAND, body)


def _describe(client: KafkaClient, broker_ids: list[int] | None, topics: set[str]) -> dict[int, list[Any]]:
    brokers = client.metadata([]).brokers
    wanted = sorted(brokers) if broker_ids is None else broker_ids
    unknown = [b for b in wanted if b not in brokers]
    if unknown:
        raise ToolError(
            f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, unknown))}. "
            f"Current existent brokers: {','.join(map(str, sorted(brokers)))}"
        )
    described = {}
    for broker_id in wanted:
        broker = brokers[broker_id]
        response = client.connect_to(broker.host, broker.port).request(
            ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None)
        )
        described[broker_id] = [_log_dir(result, topics) for result in response.results]
    return described


def _log_dir(result: Any, topics: set[str]) -> dict[str, Any]:
    return {
        "partitions": [
            {
                "partition": f"{t.name}-{p.partition_index}",
                "size": p.partition_size,
                "offsetLag": p.offset_lag,
                "isFuture": p.is_future_key,
            }  # fmt: skip
            for t in result.topics
            if not topics or t.name in topics
            for p in t.partitions
        ],
        "error": None if result.error_code == ErrorCode.NONE else error_name(result.error_code),
        "logDir": result.log_dir,
    }
