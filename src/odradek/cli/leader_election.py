"""`odradek leader-election`: kafka-leader-election.sh, with its flags and its output.

    odradek leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file FILE)
        [--admin.config FILE]

FILE is Kafka's `{"partitions": [{"topic": "t", "partition": 0}, ...]}`. The election type is
case-insensitive. The tool asks the controller (found through Metadata's controller id, asked
again when it answers NOT_CONTROLLER) with ElectLeaders and prints Kafka's lines:
`Successfully completed leader election (PREFERRED) for partitions t-0, t-1`, `Valid replica
already elected for partitions t-2` and, per failed partition, `Error completing leader election
(PREFERRED) for partition: t-3: ERROR_NAME: message` (Kafka prints the Java exception there), then
`N replica(s) could not be elected` on stderr and exit status 1. --all-topic-partitions asks for
every partition; the cluster then leaves out those that needed no election.

--admin.config is a Java .properties file: `default.api.timeout.ms` (how long the controller may
take, default 30000), `request.timeout.ms` and `client.id` are used, and the client's security keys
(`security.protocol`, `ssl.*`, `sasl.*`) as --command-config takes them (cli/common.py); other keys
are ignored.
Usage errors (Kafka's messages) exit 2, other failures print one line and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import ToolError, add_connection_options, connect, guarded
from odradek.cli.librdkafka import properties_file
from odradek.cli.main import UsageError
from odradek.client import KafkaClient, TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.controller.decisions import ElectionType
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, check, error_name
from odradek.protocol.messages import ElectLeadersRequest, MetadataRequest
from odradek.security.client_config import BlockingClientSecurity, client_security

COMMAND = "leader-election"
HELP = "elect the preferred or an unclean leader of partitions (kafka-leader-election)"

DEFAULT_API_TIMEOUT_MS = 30_000
RETRY_BACKOFF_S = 0.2
EXCLUSIVE = (
    "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"
)
EXPECTED_JSON = '{"partitions": [{"topic": T, "partition": P}, ...]}'

Results = dict[TopicPartition, tuple[int, str | None]]


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """What the tool takes from --admin.config."""

    api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS
    request_timeout_ms: int | None = None
    client_id: str | None = None
    security: BlockingClientSecurity | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument(
        "--election-type",
        required=True,
        type=_election_type,
        metavar="PREFERRED|UNCLEAN",
        help="preferred: back to the first replica; unclean: a live replica for a partition without a leader",
    )
    parser.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    parser.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    parser.add_argument("--all-topic-partitions", action="store_true", help="elect every partition")
    parser.add_argument(
        "--path-to-json-file", metavar="FILE", help=f"the partitions to elect: {EXPECTED_JSON}"
    )
    parser.add_argument("--admin.config", dest="admin_config", metavar="FILE", help="admin client properties")


def _election_type(text: str) -> ElectionType:
    try:
        return ElectionType[text.strip().upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected PREFERRED or UNCLEAN, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    _check_options(args)

    def body() -> int:
        partitions = _partitions(args)
        settings = _admin_settings(args.admin_config)
        with _connect(args, settings) as client:
            results = _elect(client, args.election_type, partitions, settings.api_timeout_ms)
        return _report(args.election_type, results)

    return guarded(COMMAND, body)


def _check_options(args: argparse.Namespace) -> None:
    given = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(given) != 1:
        raise UsageError(EXCLUSIVE)
    if args.topic is not None and args.partition is None:
        raise UsageError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option partition is only allowed if topic is used")


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for; None for --all-topic-partitions."""
    if args.path_to_json_file is not None:
        return _read_partitions(args.path_to_json_file)
    if args.topic is not None:
        return [TopicPartition(args.topic, args.partition)]
    return None


def _read_partitions(path: str) -> list[TopicPartition]:
    try:
        with open(path) as file:
            document = json.load(file)
    except OSError as exc:
        raise ToolError(f"Error: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ToolError(f"Error: {path} is not JSON ({EXPECTED_JSON})") from None
    if not isinstance(document, dict) or "partitions" not in document:
        raise ToolError('Error: Replica election data is missing "partitions" field')
    try:
        entries = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in document["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise ToolError(f"Error: {path} is not Kafka's replica election data ({EXPECTED_JSON})") from None
    twice = sorted({str(tp) for tp in entries if entries.count(tp) > 1})
    if twice:
        raise ToolError(f"Error: Replica election data contains duplicate partitions: {','.join(twice)}")
    return entries


def _admin_settings(path: str | None) -> AdminSettings:
    if path is None:
        return AdminSettings()
    props = properties_file(path)
    try:
        return AdminSettings(
            int(props.get("default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)),
            int(props["request.timeout.ms"]) if "request.timeout.ms" in props else None,
            props.get("client.id"),
            client_security(props),
        )
    except ValueError as exc:
        raise ToolError(f"Error: --admin.config {path}: {exc}") from None


def _connect(args: argparse.Namespace, settings: AdminSettings) -> KafkaClient:
    """A client whose requests may wait for the whole election (the API timeout and a margin)."""
    request_ms = max(settings.request_timeout_ms or 0, settings.api_timeout_ms)
    return connect(
        args,
        COMMAND,
        timeout_s=request_ms / 1000 + 5,
        client_id=settings.client_id,
        security=settings.security,
    )


def _elect(
    client: KafkaClient, election_type: ElectionType, partitions: list[TopicPartition] | None, timeout_ms: int
) -> Results:
    """Each partition's (error code, message), asked of the controller until it answers as one."""
    request = _request(election_type, partitions, timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            response = _controller(client, deadline).request(ApiKey.ELECT_LEADERS, request)
        except OSError:  # the controller went away: ask who the controller is now
            if time.monotonic() > deadline:
                raise
        else:
            results = _results(response)
            codes = [response.error_code, *(code for code, _ in results.values())]
            if ErrorCode.NOT_CONTROLLER not in codes:
                check(response.error_code)
                return results
            if time.monotonic() > deadline:
                check(ErrorCode.NOT_CONTROLLER, "The controller moved and was not found again in time.")
        time.sleep(RETRY_BACKOFF_S)


def _controller(client: KafkaClient, deadline: float) -> BrokerConnection:
    """A connection to the controller Metadata names, waiting for one until `deadline`."""
    while True:
        metadata = client.request(ApiKey.METADATA, MetadataRequest(topics=[]))
        brokers = {b.node_id: b for b in metadata.brokers}
        controller = brokers.get(metadata.controller_id)
        if controller is not None:
            return client.connect_to(controller.host, controller.port)
        if time.monotonic() > deadline:
            raise ToolError("Error: the cluster names no live controller")
        time.sleep(RETRY_BACKOFF_S)


def _request(
    election_type: ElectionType, partitions: list[TopicPartition] | None, timeout_ms: int
) -> ElectLeadersRequest:
    if partitions is None:
        return ElectLeadersRequest(election_type=election_type, topic_partitions=None, timeout_ms=timeout_ms)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    asked = [ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in by_topic.items()]
    return ElectLeadersRequest(election_type=election_type, topic_partitions=asked, timeout_ms=timeout_ms)


def _results(response: Any) -> Results:
    return {
        TopicPartition(topic.topic, p.partition_id): (p.error_code, p.error_message)
        for topic in response.replica_election_results
        for p in topic.partition_result
    }


def _report(election_type: ElectionType, results: Mapping[TopicPartition, tuple[int, str | None]]) -> int:
    """Kafka's lines for `results`; the exit status (1 when a partition failed)."""
    succeeded = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.NONE)
    noop = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted(tp for tp in results if tp not in succeeded and tp not in noop)
    if succeeded:
        listed = ", ".join(map(str, succeeded))
        print(f"Successfully completed leader election ({election_type.name}) for partitions {listed}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(map(str, noop))}")
    for tp in failed:
        code, message = results[tp]
        cause = f"{error_name(code)}: {message}" if message else error_name(code)
        print(f"Error completing leader election ({election_type.name}) for partition: {tp}: {cause}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
