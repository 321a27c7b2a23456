"""`odradek delete-records`: kafka-delete-records.sh, with its flags and its output.

    odradek delete-records --bootstrap-server H:P --offset-json-file FILE

FILE is Kafka's `{"partitions": [{"topic": "t", "partition": 0, "offset": 3}, ...], "version": 1}`
(offset -1: up to the high watermark). Each partition's leader moves its log start offset there
(DeleteRecords); the output is Kafka's: `Executing records delete operation`, `Records delete
operation completed:` and a line per partition, `partition: t-0<TAB>low_watermark: 3`, or
`partition: t-0<TAB>error: NAME` where Kafka prints the Java exception's message. Exit status 1
when a partition failed (Kafka exits 0), the file is malformed or names a partition twice.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from odradek.cli.common import ToolError, add_connection_options, connect, guarded
from odradek.client import KafkaClient, TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_name
from odradek.protocol.messages import DeleteRecordsRequest

COMMAND = "delete-records"
HELP = "delete the records of partitions below given offsets (kafka-delete-records)"

TIMEOUT_MS = 30_000
EXPECTED_JSON = '{"partitions": [{"topic": T, "partition": P, "offset": O}, ...]}'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument("--offset-json-file", required=True, metavar="FILE", help="partitions and offsets")


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        wanted = _read_offsets(args.offset_json_file)
        print("Executing records delete operation")
        with connect(args, COMMAND) as client:
            results = _delete(client, wanted)
        print("Records delete operation completed:")
        for tp, (code, low_watermark) in results.items():
            outcome = (
                f"low_watermark: {low_watermark}" if code == ErrorCode.NONE else f"error: {error_name(code)}"
            )
            print(f"partition: {tp.topic}-{tp.partition}\t{outcome}")
        return 0 if all(code == ErrorCode.NONE for code, _ in results.values()) else 1

    return guarded(COMMAND, body)


def _read_offsets(path: str) -> dict[TopicPartition, int]:
    try:
        with open(path) as file:
            document = json.load(file)
        entries = [
            (TopicPartition(str(e["topic"]), int(e["partition"])), int(e["offset"]))
            for e in document["partitions"]
        ]
    except OSError as exc:
        raise ToolError(f"Error: cannot read {path}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError):
        raise ToolError(f"Error: {path} is not Kafka's offset JSON ({EXPECTED_JSON})") from None
    offsets = dict(entries)
    if len(offsets) != len(entries):
        twice = sorted(
            {f"{tp.topic}-{tp.partition}" for tp, _ in entries if sum(t == tp for t, _ in entries) > 1}
        )
        raise ToolError(f"Error: Offset json file contains duplicate topic partitions: {','.join(twice)}")
    return offsets


def _delete(client: KafkaClient, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """(error code, low watermark) per partition, each asked of its leader."""
    cluster = client.metadata(sorted({tp.topic for tp in wanted}))
    leaders = {(p.topic, p.partition): p.leader for t in cluster.topics.values() for p in t}
    results: dict[TopicPartition, tuple[int, int]] = {}
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in wanted:
        leader = leaders.get((tp.topic, tp.partition))
        if leader is None or leader not in cluster.brokers:
            missing = leader is None
            results[tp] = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if missing else ErrorCode.LEADER_NOT_AVAILABLE,
                -1,
            )
        else:
            by_leader[leader].append(tp)
    for leader, tps in by_leader.items():
        broker = cluster.brokers[leader]
        response = client.connect_to(broker.host, broker.port).request(
            ApiKey.DELETE_RECORDS, _request(tps, wanted)
        )
        results.update(_partition_results(response))
    return {tp: results[tp] for tp in wanted}


def _request(tps: list[TopicPartition], wanted: dict[TopicPartition, int]) -> DeleteRecordsRequest:
    by_topic: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(DeleteRecordsRequest.DeleteRecordsPartition(tp.partition, wanted[tp]))
    return DeleteRecordsRequest(
        topics=[DeleteRecordsRequest.DeleteRecordsTopic(name, parts) for name, parts in by_topic.items()],
        timeout_ms=TIMEOUT_MS,
    )


def _partition_results(response: Any) -> dict[TopicPartition, tuple[int, int]]:
    return {
        TopicPartition(t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }
