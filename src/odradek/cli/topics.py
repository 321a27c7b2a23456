"""`odradek topics`: kafka-topics.sh, with its flags and its output.

    odradek topics --bootstrap-server H:P --create --topic T [--partitions N] [--replication-factor R]
        [--replica-assignment 0:1,1:2] [--config k=v ...] [--if-not-exists]
    odradek topics --bootstrap-server H:P --list [--topic REGEX] [--exclude-internal]
    odradek topics --bootstrap-server H:P --describe [--topic REGEX] [--if-exists] [--exclude-internal]
        [--under-replicated-partitions | --unavailable-partitions | --under-min-isr-partitions |
         --at-min-isr-partitions | --topics-with-overrides]
    odradek topics --bootstrap-server H:P --alter --topic REGEX --partitions N [--replica-assignment ...]
    odradek topics --bootstrap-server H:P --delete --topic REGEX [--if-exists]

Output as Kafka 3.9's TopicCommand prints it: "Created topic T.", one name per line for --list, and
for --describe a `Topic: T<TAB>TopicId: ...<TAB>PartitionCount: ...<TAB>ReplicationFactor: ...<TAB>Configs:
k=v,...` line (the configs that are not defaults) then one `<TAB>Topic: T<TAB>Partition: P<TAB>Leader: L
<TAB>Replicas: ...<TAB>Isr: ...` line per partition. --topic is a regex matching whole names (as Kafka's
include list) for every action but --create. --alter and --delete print nothing on success.
Errors: `Error while executing topic command : MESSAGE` on stderr, exit status 1.

Talks the protocol (Metadata, DescribeConfigs, CreateTopics, CreatePartitions, DeleteTopics) through
`odradek.client.KafkaClient`, so it works against any Kafka broker.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import (
    ToolError,
    add_connection_options,
    connect,
    guarded,
    joined,
    topic_filter,
)
from odradek.cli.main import UsageError
from odradek.client import KafkaClient
from odradek.controller.zk.znodes import uuid_to_kafka
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, check
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    MetadataRequest,
)
from odradek.protocol.primitives import ZERO_UUID

COMMAND = "topics"
HELP = "create, list, describe, alter and delete topics (kafka-topics)"

ERROR_PREFIX = "Error while executing topic command : "
TOPIC_RESOURCE = 2
DEFAULT_CONFIG_SOURCE = 5
BROKER_DEFAULT = -1
TIMEOUT_MS = 30_000
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
    "collide. To avoid issues it is best to use either, but not both."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ("create", "list", "describe", "alter", "delete"):
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    parser.add_argument("--topic", help="the topic (--create) or a regex of topics (other actions)")
    parser.add_argument("--partitions", type=int, help="partition count (--create, --alter)")
    parser.add_argument("--replication-factor", type=int, help="replicas per partition (--create)")
    parser.add_argument(
        "--replica-assignment",
        type=_replica_assignment,
        metavar="B:B,B:B,...",
        help="brokers of each partition: partitions separated by ',', their replicas by ':'",
    )
    parser.add_argument(
        "--config", action="append", default=[], type=_config_pair, metavar="K=V", help="a topic config"
    )
    parser.add_argument("--if-not-exists", action="store_true", help="--create: no error if it exists")
    parser.add_argument("--if-exists", action="store_true", help="no error if no topic matches")
    filters = parser.add_mutually_exclusive_group()
    filters.add_argument("--under-replicated-partitions", action="store_true")
    filters.add_argument("--unavailable-partitions", action="store_true")
    filters.add_argument("--under-min-isr-partitions", action="store_true")
    filters.add_argument("--at-min-isr-partitions", action="store_true")
    filters.add_argument("--topics-with-overrides", action="store_true")
    parser.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    action = next(a for a in _ACTIONS if getattr(args, a))

    def body() -> int:
        with connect(args, COMMAND) as client:
            _ACTIONS[action](client, args)
        return 0

    return guarded(COMMAND, body, error_prefix=ERROR_PREFIX)


def _check_usage(args: argparse.Namespace) -> None:
    if (args.create or args.alter or args.delete) and args.topic is None:
        raise UsageError("--topic is required with --create, --alter and --delete")
    if args.replica_assignment is not None and (
        args.replication_factor is not None or (args.create and args.partitions is not None)
    ):
        raise UsageError("--replica-assignment cannot be used with --partitions or --replication-factor")
    if args.alter and args.partitions is None:
        raise UsageError("--alter needs --partitions")
    if args.config and not args.create:
        raise UsageError("--config only goes with --create (use `odradek configs` to alter configs)")


def _replica_assignment(text: str) -> list[list[int]]:
    try:
        return [[int(b) for b in partition.split(":")] for partition in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad replica assignment {text!r}; expected B:B,B:B,...") from None


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return key, value


# ---------------------------------------------------------------------------------------------
# the actions


def _create(client: KafkaClient, args: argparse.Namespace) -> None:
    if "." in args.topic or "_" in args.topic:
        print(COLLISION_WARNING)
    assignment = args.replica_assignment or []
    topic = CreateTopicsRequest.CreatableTopic(
        name=args.topic,
        num_partitions=BROKER_DEFAULT if assignment or args.partitions is None else args.partitions,
        replication_factor=BROKER_DEFAULT if args.replication_factor is None else args.replication_factor,
        assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=brokers)
            for i, brokers in enumerate(assignment)
        ],
        configs=[CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in args.config],
    )
    response = client.request(
        ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[topic], timeout_ms=TIMEOUT_MS)
    )
    result = response.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    check(result.error_code, result.error_message)
    print(f"Created topic {args.topic}.")


def _list(client: KafkaClient, args: argparse.Namespace) -> None:
    for topic in _matching(client, args, must_match=False):
        print(topic.name)


def _describe(client: KafkaClient, args: argparse.Namespace) -> None:
    topics = _matching(client, args, must_match=args.topic is not None and not args.if_exists)
    configs = _topic_configs(client, [t.name for t in topics])
    keep = _partition_filter(client, args, configs)
    for topic in topics:
        overrides = [(c.name, c.value) for c in configs[topic.name] if c.source != DEFAULT_CONFIG_SOURCE]
        if keep is None and (overrides or not args.topics_with_overrides):
            print(_topic_line(topic, overrides))
        if args.topics_with_overrides:
            continue
        for partition in sorted(topic.partitions, key=lambda p: p.partition_index):
            if keep is None or keep(topic.name, partition):
                print(_partition_line(topic.name, partition))


def _alter(client: KafkaClient, args: argparse.Namespace) -> None:
    topics = _matching(client, args, must_match=not args.if_exists)
    assignment = args.replica_assignment
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(
                name=topic.name,
                count=args.partitions,
                assignments=None
                if assignment is None
                else [
                    CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=brokers)
                    for brokers in assignment[len(topic.partitions) :]
                ],
            )
            for topic in topics
        ],
        timeout_ms=TIMEOUT_MS,
    )
    if topics:
        for result in client.request(ApiKey.CREATE_PARTITIONS, request).results:
            check(result.error_code, result.error_message)


def _delete(client: KafkaClient, args: argparse.Namespace) -> None:
    topics = _matching(client, args, must_match=not args.if_exists)
    for topic in topics:
        if topic.is_internal:
            raise ToolError(
                f"{ERROR_PREFIX}Topic {topic.name} is a kafka internal topic and is not allowed to be "
                "marked for deletion."
            )
    names = [t.name for t in topics]
    if names:
        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
            topic_names=names,
            timeout_ms=TIMEOUT_MS,
        )
        for result in client.request(ApiKey.DELETE_TOPICS, request).responses:
            check(result.error_code, result.error_message)


_ACTIONS: dict[str, Callable[[KafkaClient, argparse.Namespace], None]] = {
    "create": _create,
    "list": _list,
    "describe": _describe,
    "alter": _alter,
    "delete": _delete,
}


# ---------------------------------------------------------------------------------------------
# reading the cluster


def _matching(client: KafkaClient, args: argparse.Namespace, *, must_match: bool) -> list[Any]:
    """The Metadata topics --topic matches, sorted by name; without --topic every topic."""
    response = client.request(ApiKey.METADATA, MetadataRequest(topics=None))
    wanted = topic_filter(args.topic)
    topics = sorted(
        (
            t
            for t in response.topics
            if t.error_code == ErrorCode.NONE
            and wanted(t.name)
            and not (args.exclude_internal and t.is_internal)
        ),
        key=lambda t: t.name,
    )
    if must_match and not topics:
        raise ToolError(f"{ERROR_PREFIX}Topic '{args.topic}' does not exist as expected")
    return topics


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    value: str  # "null" for a sensitive value, as Kafka prints it
    source: int


def _topic_configs(client: KafkaClient, names: Sequence[str]) -> dict[str, list[TopicConfig]]:
    """Every config of each topic (DescribeConfigs), in the broker's order."""
    if not names:
        return {}
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(TOPIC_RESOURCE, name, None) for name in names
        ]
    )
    configs = {}
    for result in client.request(ApiKey.DESCRIBE_CONFIGS, request).results:
        check(result.error_code, result.error_message)
        configs[result.resource_name] = [
            TopicConfig(c.name, "null" if c.value is None else c.value, c.config_source)
            for c in result.configs
        ]
    return configs


def _partition_filter(
    client: KafkaClient, args: argparse.Namespace, configs: dict[str, list[TopicConfig]]
) -> Callable[[str, Any], bool] | None:
    """Which partitions a filter option keeps (None: no filter), as Kafka's TopicCommand decides."""
    if args.under_replicated_partitions:
        return lambda _topic, p: len(p.isr_nodes) < len(p.replica_nodes)
    if args.unavailable_partitions:
        live = set(client.metadata([]).brokers)
        return lambda _topic, p: p.leader_id not in live
    min_isr = {
        topic: int(next((c.value for c in entries if c.name == "min.insync.replicas"), "1"))
        for topic, entries in configs.items()
    }
    if args.under_min_isr_partitions:
        return lambda topic, p: p.leader_id < 0 or len(p.isr_nodes) < min_isr[topic]
    if args.at_min_isr_partitions:
        return lambda topic, p: len(p.isr_nodes) == min_isr[topic]
    return None


def _topic_line(topic: Any, configs: list[tuple[str, str]]) -> str:
    first = min(topic.partitions, key=lambda p: p.partition_index)
    topic_id = "" if topic.topic_id == ZERO_UUID else f"\tTopicId: {uuid_to_kafka(topic.topic_id)}"
    return (
        f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(topic.partitions)}"
        f"\tReplicationFactor: {len(first.replica_nodes)}"
        f"\tConfigs: {','.join(f'{k}={v}' for k, v in configs)}"
    )


def _partition_line(topic: str, partition: Any) -> str:
    leader = "none" if partition.leader_id < 0 else partition.leader_id
    return (
        f"\tTopic: {topic}\tPartition: {partition.partition_index}\tLeader: {leader}"
        f"\tReplicas: {joined(partition.replica_nodes)}\tIsr: {joined(partition.isr_nodes)}"
    )
