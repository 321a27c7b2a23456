"""`odradek reassign-partitions`: kafka-reassign-partitions.sh, with its flags and its output.

    odradek reassign-partitions --bootstrap-server H:P --generate --topics-to-move-json-file F
        --broker-list 1,2,3 [--disable-rack-aware]
    odradek reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file F
        [--throttle BYTES/S] [--replica-alter-log-dirs-throttle BYTES/S] [--additional]
    odradek reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file F
        [--preserve-throttles]
    odradek reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file F
        [--preserve-throttles]
    odradek reassign-partitions --bootstrap-server H:P --list

Behaviour and output as Kafka 3.9's ReassignPartitionsCommand:
- --generate prints "Current partition replica assignment" and "Proposed partition reassignment
  configuration", each followed by a reassignment JSON (`{"version":1,"partitions":[{"topic",
  "partition","replicas","log_dirs"}]}`); the proposal is Kafka's replica assignment over the
  --broker-list brokers (rack-aware unless --disable-rack-aware), keeping each topic's partition
  count and replication factor. Deliberate deviation: a --broker-list broker that is not in the
  cluster is refused as --execute refuses it ("Unknown broker id 9"), where Kafka leaves it out
  of the proposal without a word (a typo in the list would move every partition onto the others).
- A topic or partition of the JSON file that does not exist is never created (the tool's Metadata
  requests do not allow auto-creation): --generate and --execute fail with Kafka's "Topic T not
  found." (or "Unable to find partition: T-P"); --verify reports it as having no replicas, then
  fails as Kafka's does when clearing the missing topic's throttles.
- --execute refuses while reassignments are in progress unless --additional, prints the current
  assignment of the partitions it moves ("Save this to use as the --reassignment-json-file option
  during rollback"), with --throttle sets the throttles (the moving partitions' current replicas
  in leader.replication.throttled.replicas, their new replicas in
  follower.replication.throttled.replicas, the rate in leader/follower.replication.throttled.rate
  of every broker involved; "The inter-broker throttle limit was set to N B/s"), then sends
  AlterPartitionReassignments and prints "Successfully started partition reassignment(s) for ...".
  The throttled replicas are Kafka's move map: per partition the sources (current replicas, or the
  original ones of a reassignment in progress, which count too) and the new destinations.
  Then the log dir moves: a file entry's `"log_dirs"` (one per replica, "any" or an absolute path)
  moves each replica given a path to that log dir of its broker (AlterReplicaLogDirs, asked again
  until --timeout while a reassignment has not brought the replica there yet: cli/log_dir_moves.py),
  --replica-alter-log-dirs-throttle setting replica.alter.log.dirs.io.max.bytes.per.second on
  their brokers first ("The replica-alter-dir throttle limit was set to N B/s").
- --verify prints "Status of partition reassignment:" and a line per partition (completed, still
  in progress, or no active reassignment but another replica set, a missing partition having
  none), then a line per log dir move (an empty line when there is none); once no reassignment at
  all and none of the file's log dir moves is in progress it clears the throttles (broker rates
  and log dir throttle on every live broker, the topics' throttled replica lists) unless
  --preserve-throttles, as Kafka does. It also prints, on stderr, how far the moves have
  got (`reassignment_progress`: partitions done, bytes copied by the replicas being added).
- --cancel cancels the reassignments of the file's partitions that are in progress (as Kafka, not
  one that only adds replicas) and the file's log dir moves in progress (each replica is moved back
  to its current log dir), then clears the throttles as --verify does; --list prints the
  reassignments in progress.
None of them waits for a reassignment to finish, as in Kafka: --verify is run again until done.

AlterPartitionReassignments and ListPartitionReassignments go to the controller the Metadata
response names (asked again after NOT_CONTROLLER, while a new one is elected), throttles through
IncrementalAlterConfigs (a broker's rates to that broker). Errors: one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from odradek.cli import log_dir_moves, reassignment_progress
from odradek.cli.common import ToolError, add_connection_options, connect, guarded, joined
from odradek.cli.main import UsageError
from odradek.client import KafkaClient
from odradek.client.connection import BrokerConnection
from odradek.client.reassignments import alter_reassignments_request
from odradek.controller.decisions import BrokerPlacement, assign_replicas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, check
from odradek.protocol.messages import IncrementalAlterConfigsRequest, MetadataRequest
from odradek.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from odradek.protocol.topic_partition import TopicPartition

COMMAND = "reassign-partitions"
HELP = "move partition replicas between brokers (kafka-reassign-partitions)"

Assignment = dict[TopicPartition, list[int]]
Moves = dict[TopicPartition, tuple[set[int], set[int]]]  # per partition: sources, destinations

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
CONTROLLER_WAIT_S = 30.0
CONTROLLER_RETRY_S = 0.5
EXISTING_REASSIGNMENTS = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override "
    "this and create a new partition assignment in addition to the existing one. The --additional "
    "flag can also be used to change the throttle by resubmitting the current reassignment."
)
VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
    "throttle is removed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose a reassignment of topics")
    actions.add_argument("--execute", action="store_true", help="start the reassignment of a file")
    actions.add_argument("--verify", action="store_true", help="report a reassignment's status")
    actions.add_argument("--cancel", action="store_true", help="cancel a reassignment in progress")
    actions.add_argument("--list", action="store_true", help="list the reassignments in progress")
    parser.add_argument("--reassignment-json-file", type=Path, metavar="FILE", help="the reassignment")
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE", help="--generate's topics")
    parser.add_argument("--broker-list", metavar="1,2,3", help="--generate's brokers")
    parser.add_argument("--disable-rack-aware", action="store_true", help="--generate ignores racks")
    parser.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S", help="inter-broker throttle")
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=-1,
        metavar="BYTES/S",
        help="throttle of the moves between log dirs of a broker",
    )
    parser.add_argument("--additional", action="store_true", help="--execute despite reassignments")
    parser.add_argument("--preserve-throttles", action="store_true", help="--verify/--cancel keep throttles")
    parser.add_argument(
        "--timeout", type=int, default=10_000, metavar="MS", help="wait this long for log dir moves to start"
    )


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    action = next(a for a in _ACTIONS if getattr(args, a))

    def body() -> int:
        with connect(args, COMMAND) as client:
            _ACTIONS[action](client, args)
        return 0

    return guarded(COMMAND, body)


def _check_usage(args: argparse.Namespace) -> None:
    if (args.execute or args.verify or args.cancel) and args.reassignment_json_file is None:
        raise UsageError("--reassignment-json-file is required with --execute, --verify and --cancel")
    if args.generate and (args.topics_to_move_json_file is None or args.broker_list is None):
        raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
    if (args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0) and not args.execute:
        raise UsageError("--throttle and --replica-alter-log-dirs-throttle go with --execute")


# ---------------------------------------------------------------------------------------------
# the actions


def _generate(client: KafkaClient, args: argparse.Namespace) -> None:
    topics = _topics_to_move(_read_json(args.topics_to_move_json_file))
    brokers = _broker_list(args.broker_list)
    current = _current_assignment(client, topics)
    _check_brokers(client, brokers)
    placements = _placements(client, brokers, rack_aware=not args.disable_rack_aware)
    proposed: Assignment = {}
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        replication_factor = len(current[TopicPartition(topic, partitions[0])])
        assigned = assign_replicas(placements, len(partitions), replication_factor)
        proposed.update({TopicPartition(topic, p): list(assigned[p]) for p in partitions})
    print(f"Current partition replica assignment\n{_assignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{_assignment_json(proposed)}")


def _execute(client: KafkaClient, args: argparse.Namespace) -> None:
    proposed, log_dirs = _reassignment_file(args.reassignment_json_file)
    ongoing = _in_progress(client)
    if ongoing and not args.additional:
        raise ToolError(EXISTING_REASSIGNMENTS)
    _check_brokers(client, {b for replicas in proposed.values() for b in replicas})
    current = _current_assignment(client, sorted({t for t, _ in proposed}), proposed)
    print(f"Current partition replica assignment\n\n{_assignment_json(current)}\n")
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print(VERIFY_WARNING)
        _throttle(client, args, _moves(ongoing, current, proposed), log_dirs)
    errors = _alter(client, proposed)
    if errors:
        lines = [f"{_name(tp)}: {message}" for tp, message in sorted(errors.items())]
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(lines))
    plural = "" if len(proposed) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {joined(map(_name, sorted(proposed)))}")
    if log_dirs:
        log_dir_moves.execute(client, log_dirs, args.timeout)


def _throttle(
    client: KafkaClient, args: argparse.Namespace, moves: Moves, log_dirs: Mapping[log_dir_moves.Replica, str]
) -> None:
    if args.throttle >= 0:
        _set_throttles(client, moves, args.throttle)
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    if args.replica_alter_log_dirs_throttle >= 0:
        _set_log_dir_throttle(client, log_dirs, args.replica_alter_log_dirs_throttle)
        print(f"The replica-alter-dir throttle limit was set to {args.replica_alter_log_dirs_throttle} B/s")


def _verify(client: KafkaClient, args: argparse.Namespace) -> None:
    targets, log_dirs = _reassignment_file(args.reassignment_json_file)
    ongoing = _in_progress(client)
    current = _replicas_if_any(client, targets)
    print("Status of partition reassignment:")
    for tp in sorted(targets):
        if tp in ongoing:
            print(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current[tp] == targets[tp]:
            print(f"Reassignment of partition {_name(tp)} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {_name(tp)}, but replica set is "
                f"{joined(current[tp])} rather than {joined(targets[tp])}."
            )
    replicas = log_dir_moves.states(client, log_dirs)
    print("\n".join(log_dir_moves.report(log_dirs, replicas)))
    reassignment_progress.report(client, targets, {tp: adding for tp, (_, adding, _) in ongoing.items()})
    if not ongoing and not log_dir_moves.in_progress(replicas) and not args.preserve_throttles:
        _clear_throttles(client, targets)


def _cancel(client: KafkaClient, args: argparse.Namespace) -> None:
    targets, log_dirs = _reassignment_file(args.reassignment_json_file)
    ongoing = sorted(
        tp for tp, (_, adding, removing) in _in_progress(client, targets).items() if not adding or removing
    )  # Kafka's filter: a reassignment that only adds replicas is left alone
    if ongoing:
        errors = _alter(client, dict.fromkeys(ongoing))
        if errors:
            lines = [f"{_name(tp)}: {message}" for tp, message in sorted(errors.items())]
            plural = "" if len(errors) == 1 else "s"
            raise ToolError(f"Error cancelling partition reassignment{plural} for:\n" + "\n".join(lines))
        plural = "" if len(ongoing) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {joined(map(_name, ongoing))}")
    else:
        print("None of the specified partition reassignments are active.")
    moving = log_dir_moves.active(log_dir_moves.states(client, log_dirs))
    if moving:
        log_dir_moves.execute(client, moving, args.timeout)
    else:
        print("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        _clear_throttles(client, targets)


def _list(client: KafkaClient, args: argparse.Namespace) -> None:
    ongoing = _in_progress(client)
    if not ongoing:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        line = f"{_name(tp)}: replicas: {joined(replicas)}."
        line += f" adding: {joined(adding)}." if adding else ""
        line += f" removing: {joined(removing)}." if removing else ""
        print(line)


_ACTIONS: dict[str, Callable[[KafkaClient, argparse.Namespace], None]] = {
    "generate": _generate,
    "execute": _execute,
    "verify": _verify,
    "cancel": _cancel,
    "list": _list,
}


# ---------------------------------------------------------------------------------------------
# the files


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolError(f"Error: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ToolError(f"Error: {path} is not valid JSON: {exc}") from None


def _topics_to_move(document: Any) -> list[str]:
    """The topics of a --topics-to-move-json-file: `{"topics":[{"topic":"t"}],"version":1}`."""
    entries = document.get("topics") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "topic" in e for e in entries):
        raise ToolError('Error: the topics-to-move JSON needs {"topics":[{"topic":"NAME"},...]}')
    topics = [str(e["topic"]) for e in entries]
    if len(set(topics)) != len(topics):
        raise ToolError(f"Error: List of topics to reassign contains duplicate entries: {joined(topics)}")
    return topics


def _reassignment_file(path: Path) -> tuple[Assignment, dict[log_dir_moves.Replica, str]]:
    """The partitions and target replicas of a reassignment JSON file, checked as Kafka checks them,
    and the log dir moves its "log_dirs" ask for."""
    document = _read_json(path)
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ToolError('Error: the reassignment JSON needs {"version":1,"partitions":[...]}')
    targets: Assignment = {}
    log_dirs: dict[log_dir_moves.Replica, str] = {}
    for entry in entries:
        tp, replicas = _reassignment_entry(entry)
        log_dirs.update(log_dir_moves.parse(*tp, replicas, entry.get("log_dirs")))
        if not replicas:
            raise ToolError("Error: Partition replica list cannot be empty")
        if tp in targets:
            raise ToolError(f"Error: Partition reassignment contains duplicate topic partitions: {_name(tp)}")
        if len(set(replicas)) != len(replicas):
            raise ToolError(
                f"Error: Partition replica lists may not contain duplicate entries: {_name(tp)} "
                f"contains multiple entries for {joined(r for r in replicas if replicas.count(r) > 1)}"
            )
        targets[tp] = replicas
    if not targets:
        raise ToolError("Error: Partition reassignment list cannot be empty")
    return targets, log_dirs


def _reassignment_entry(entry: Any) -> tuple[TopicPartition, list[int]]:
    try:
        replicas = [int(r) for r in entry["replicas"]]
        return TopicPartition(str(entry["topic"]), int(entry["partition"])), replicas
    except (KeyError, TypeError, ValueError):
        raise ToolError(
            f'Error: bad reassignment entry {json.dumps(entry)}: needs "topic", "partition" and "replicas"'
        ) from None


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list expects broker ids separated by ',', got {text!r}") from None
    if len(set(brokers)) != len(brokers):
        raise ToolError(f"Error: Broker list contains duplicate entries: {text}")
    return brokers


def _assignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# ---------------------------------------------------------------------------------------------
# the cluster


def _metadata(client: KafkaClient, topics: Iterable[str] | None = ()) -> Any:
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return client.request(ApiKey.METADATA, MetadataRequest(topics=wanted, allow_auto_topic_creation=False))


def _current_assignment(
    client: KafkaClient, topics: Sequence[str], partitions: Iterable[TopicPartition] | None = None
) -> Assignment:
    """The replicas of `topics` (only `partitions`, when given); a missing one is an error."""
    current: Assignment = {}
    for topic in _metadata(client, topics).topics:
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise ToolError(f"Error: Topic {topic.name} not found.")
        check(topic.error_code)
        current.update({(topic.name, p.partition_index): list(p.replica_nodes) for p in topic.partitions})
    if partitions is None:
        return current
    missing = [tp for tp in partitions if tp not in current]
    if missing:
        raise ToolError(f"Error: Unable to find partition: {_name(missing[0])}")
    return {tp: current[tp] for tp in partitions}


def _replicas_if_any(client: KafkaClient, partitions: Iterable[TopicPartition]) -> Assignment:
    """The replicas of each of `partitions`; none for one that does not exist (--verify)."""
    found: Assignment = {}
    for topic in _metadata(client, sorted({t for t, _ in partitions})).topics:
        found.update({(topic.name, p.partition_index): list(p.replica_nodes) for p in topic.partitions})
    return {tp: found.get(tp, []) for tp in partitions}


def _live_brokers(client: KafkaClient) -> dict[int, Any]:
    return {b.node_id: b for b in _metadata(client).brokers}


def _check_brokers(client: KafkaClient, brokers: Iterable[int]) -> None:
    live = _live_brokers(client)
    unknown = sorted(b for b in brokers if b not in live)
    if unknown:
        raise ToolError(f"Error: Unknown broker id {unknown[0]}")


def _placements(client: KafkaClient, brokers: Sequence[int], *, rack_aware: bool) -> list[BrokerPlacement]:
    """The --broker-list brokers (all in the cluster), with their racks unless --disable-rack-aware."""
    live = _live_brokers(client)
    placements = [BrokerPlacement(b, live[b].rack if rack_aware else None) for b in brokers]
    if len({p.rack is None for p in placements}) > 1:
        raise ToolError(
            "Error: Not all brokers have rack information. Add --disable-rack-aware in command line to "
            "make replica assignment without rack information."
        )
    return placements


def _controller_request(client: KafkaClient, api_key: int, request: Any) -> Any:
    """`request` answered by the controller, asked again while the answer is NOT_CONTROLLER."""
    deadline = time.monotonic() + CONTROLLER_WAIT_S
    while True:
        metadata = _metadata(client)
        controller = next((b for b in metadata.brokers if b.node_id == metadata.controller_id), None)
        if controller is not None:
            response = client.connect_to(controller.host, controller.port).request(api_key, request)
            if response.error_code != ErrorCode.NOT_CONTROLLER:
                check(response.error_code, response.error_message)
                return response
        if time.monotonic() > deadline:
            raise ToolError("Error: no controller answered; is the cluster electing one?")
        time.sleep(CONTROLLER_RETRY_S)


def _in_progress(
    client: KafkaClient, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
    """The reassignments in progress (of `partitions`, when given): replicas, adding, removing."""
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        topics = [
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(t, p)
            for t, p in by_topic.items()
        ]
    request = ListPartitionReassignmentsRequest(topics=topics)
    response = _controller_request(client, ApiKey.LIST_PARTITION_REASSIGNMENTS, request)
    return {
        TopicPartition(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }


def _alter(
    client: KafkaClient, targets: Mapping[TopicPartition, list[int] | None]
) -> dict[TopicPartition, str]:
    """Send the targets (None: cancel); the message of each partition that failed."""
    request = alter_reassignments_request(targets)
    response = _controller_request(client, ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
    return {
        TopicPartition(t.name, p.partition_index): p.error_message or ErrorCode(p.error_code).name
        for t in response.responses
        for p in t.partitions
        if p.error_code != ErrorCode.NONE
    }


# ---------------------------------------------------------------------------------------------
# throttles (KIP-73)


def _moves(ongoing: Mapping[TopicPartition, Any], current: Assignment, proposed: Assignment) -> Moves:
    """Kafka's move map: per partition, the source replicas (of a reassignment in progress: its
    original ones) and the destinations; the reassignments in progress count too."""
    moves: Moves = {
        tp: (set(replicas) - set(adding), set(adding)) for tp, (replicas, adding, _) in ongoing.items()
    }
    for tp, target in proposed.items():
        sources = moves[tp][0] if tp in moves else set(current[tp])
        moves[tp] = (sources, set(target) - sources)
    return moves


def _set_throttles(client: KafkaClient, moves: Moves, rate: int) -> None:
    """The sources as leader-throttled, the destinations as follower-throttled replicas of each
    topic; the rate on every broker involved."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (topic, index), (sources, destinations) in moves.items():
        leaders.setdefault(topic, set()).update(f"{index}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{index}:{b}" for b in destinations)
    for topic in sorted(leaders):
        configs = {
            LEADER_REPLICAS: ",".join(sorted(leaders[topic])),
            FOLLOWER_REPLICAS: ",".join(sorted(followers[topic])),
        }
        _alter_configs(client.any_connection(), TOPIC_RESOURCE, topic, configs)
    live = _live_brokers(client)
    for broker_id in sorted({b for sources, destinations in moves.values() for b in sources | destinations}):
        if broker_id in live:
            connection = client.connect_to(live[broker_id].host, live[broker_id].port)
            _alter_configs(
                connection,
                BROKER_RESOURCE,
                str(broker_id),
                {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)},
            )


def _set_log_dir_throttle(client: KafkaClient, moves: Iterable[log_dir_moves.Replica], rate: int) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second on the brokers of the log dir moves."""
    live = _live_brokers(client)
    for broker_id in sorted({broker for _, _, broker in moves}):
        if broker_id in live:
            connection = client.connect_to(live[broker_id].host, live[broker_id].port)
            _alter_configs(connection, BROKER_RESOURCE, str(broker_id), {LOG_DIR_RATE: str(rate)})


def _clear_throttles(client: KafkaClient, targets: Assignment) -> None:
    """Kafka's clearAllThrottles: the rates of every broker (those alive: a dead one cannot be
    reached) and the topics' throttled replica lists."""
    live = _live_brokers(client)
    brokers = sorted(set(live) | {b for replicas in targets.values() for b in replicas})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {joined(brokers)}")
    for broker_id in brokers:
        if broker_id in live:
            connection = client.connect_to(live[broker_id].host, live[broker_id].port)
            _alter_configs(
                connection,
                BROKER_RESOURCE,
                str(broker_id),
                dict.fromkeys((LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)),
            )
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {joined(topics)}")
    for topic in topics:
        configs = dict.fromkeys((LEADER_REPLICAS, FOLLOWER_REPLICAS))
        _alter_configs(client.any_connection(), TOPIC_RESOURCE, topic, configs)


def _alter_configs(
    connection: BrokerConnection, resource_type: int, name: str, configs: Mapping[str, str | None]
) -> None:
    """IncrementalAlterConfigs: SET each config with a value, DELETE each with None."""
    ops = [
        IncrementalAlterConfigsRequest.AlterableConfig(k, DELETE if v is None else SET, v)
        for k, v in configs.items()
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type, name, ops)]
    )
    for result in connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request).responses:
        check(result.error_code, result.error_message)
