"""`odradek share-groups`: kafka-share-groups.sh (Kafka 4.4's ShareGroupCommand), with its flags and
its output.

    odradek share-groups --bootstrap-server H:P --list [--state [STATE,...]]
    odradek share-groups --bootstrap-server H:P --describe (--group G ... | --all-groups)
        [--offsets | --members | --state] [--verbose]
    odradek share-groups --bootstrap-server H:P --delete (--group G ... | --all-groups)
    odradek share-groups --bootstrap-server H:P --reset-offsets --group G (--topic T ... | --all-topics)
        (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:mm:SS.sss) [--dry-run | --execute]
    odradek share-groups --bootstrap-server H:P --delete-offsets --group G --topic T ...

Output as Kafka's ShareGroupCommand prints it: a blank line before each table; the offsets table
GROUP TOPIC PARTITION [LEADER-EPOCH] START-OFFSET LAG (the share-partitions with state), the members
table GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS [MEMBER-EPOCH] ASSIGNMENT (`topic:0,1`), the
state table GROUP COORDINATOR (ID) STATE [GROUP-EPOCH ASSIGNMENT-EPOCH] #MEMBERS, the NEW-OFFSET
table of a reset in the order Kafka's HashMap gives, the TOPIC STATUS table of --delete-offsets,
"Share group 'g' has no active members." on stderr, "Share group 'g' has no offset information.",
"Deletion of requested share groups ('g') was successful." and Kafka's error lines.

Differences from Kafka, deliberate: a group that does not exist exits with status 1 after Kafka's
line (Kafka exits 0 with a Java stack trace on stderr); a reset without --execute is a dry run
without Kafka's warning; --to-offset, --shift-by, --by-duration and --to-current are not offered.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from odradek.cli.common import add_connection_options, connect, guarded
from odradek.cli.consumer_groups import _datetime_ms, _padded, _wanted, _width
from odradek.cli.main import UsageError
from odradek.client import TopicPartition
from odradek.client.share_admin import ShareAdmin, ShareGroupReport
from odradek.protocol.errors import ErrorCode, KafkaError

COMMAND = "share-groups"
HELP = "list, describe and delete share groups, reset and delete their start offsets (kafka-share-groups)"

DEFAULT_TIMEOUT_MS = 5000
EARLIEST, LATEST = -2, -1
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
# the Java exception Kafka's tool names for an error code
_EXCEPTIONS: dict[int, str] = {
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in _ACTIONS:
        actions.add_argument(f"--{action.replace('_', '-')}", action="store_true")
    parser.add_argument("--group", action="append", default=[], help="a share group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every share group")
    parser.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic with state")
    views = parser.add_mutually_exclusive_group()
    views.add_argument("--offsets", action="store_true", help="--describe: start offsets and lag (default)")
    views.add_argument("--members", action="store_true", help="--describe: the members")
    views.add_argument("--state", nargs="?", const="", metavar="STATE,...", help="--describe: the state")
    parser.add_argument("--verbose", action="store_true", help="--describe: more columns")
    targets = parser.add_mutually_exclusive_group()
    targets.add_argument("--to-earliest", action="store_true")
    targets.add_argument("--to-latest", action="store_true")
    targets.add_argument("--to-datetime", type=_datetime_ms, metavar="YYYY-MM-DDTHH:mm:SS.sss")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--dry-run", action="store_true")
    modes.add_argument("--execute", action="store_true")


def run(args: argparse.Namespace) -> int:
    action = next(a for a in _ACTIONS if getattr(args, a))
    _check_usage(args, action)

    def body() -> int:
        with connect(args, COMMAND) as client:
            return ACTIONS[action](ShareAdmin(client, args.timeout / 1000), args)

    return guarded(COMMAND, body)


def _check_usage(args: argparse.Namespace, action: str) -> None:
    if action != "list" and not (args.group or args.all_groups):
        raise UsageError("--group or --all-groups is required")
    if action == "reset_offsets":
        if not (args.to_earliest or args.to_latest or args.to_datetime is not None):
            raise UsageError(
                "one of --to-earliest, --to-latest, --to-datetime is required with --reset-offsets"
            )
        if not (args.topic or args.all_topics):
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if action == "delete_offsets" and not args.topic:
        raise UsageError("--delete-offsets needs --topic")


def _groups(admin: ShareAdmin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_share_groups()]
    return list(args.group)


def _not_found(exc: KafkaError) -> int:
    name = _EXCEPTIONS.get(exc.code, type(exc).__name__)
    failure = f"org.apache.kafka.common.errors.{name}: {exc.message}"
    print(f"\nError: Executing share group command failed due to {failure}")
    return 1


# -- the actions ------------------------------------------------------------------------------------


def list_groups(admin: ShareAdmin, args: argparse.Namespace) -> int:
    listed = admin.list_share_groups()
    if args.state is None:
        for group in listed:
            print(group.group_id)
        return 0
    states = _wanted(args.state)
    shown = [g for g in listed if not states or g.state.lower() in states]
    rows = [["GROUP", "STATE"], *([g.group_id, g.state] for g in shown)]
    for row in rows:
        print(_padded(row, [_width(rows[1:], 0)]))
    return 0


def describe(admin: ShareAdmin, args: argparse.Namespace) -> int:
    status = 0
    for group in _groups(admin, args):
        try:
            if args.members:
                _describe_members(admin.describe_share(group), args.verbose)
            elif args.state is not None:
                _describe_state(admin.describe_share(group), args.verbose)
            else:
                admin.describe_share(group)  # GROUP_ID_NOT_FOUND before any table, as Kafka
                _describe_offsets(admin, group, args.verbose)
        except KafkaError as exc:
            if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                raise
            status = _not_found(exc)
    return status


def _table(rows: list[list[str]], widths: list[int]) -> None:
    print()
    for row in rows:
        print(_padded(row, widths))


def _describe_offsets(admin: ShareAdmin, group: str, verbose: bool) -> None:
    offsets = admin.start_offsets(group)
    if not offsets:
        print(f"\nShare group '{group}' has no offset information.")
        return
    head = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
    rows = [
        [
            group,
            o.tp.topic,
            str(o.tp.partition),
            *([_number(o.leader_epoch)] if verbose else []),
            _number(o.start_offset),
            _number(o.lag),
        ]
        for o in offsets
    ]
    widths = [_width(rows, 0), _width(rows, 1), 10, *([13] if verbose else []), 13]
    _table([head, *rows], widths)


def _describe_members(report: ShareGroupReport, verbose: bool) -> None:
    if not report.members:
        print(f"\nShare group '{report.group_id}' has no active members.", file=sys.stderr)
        return
    head = [
        "GROUP",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        *(["MEMBER-EPOCH"] if verbose else []),
    ]
    rows = [
        [
            report.group_id,
            m.member_id,
            m.host,
            m.client_id,
            str(len(m.partitions)),
            *([str(m.member_epoch)] if verbose else []),
            _assignment(m.partitions),
        ]
        for m in sorted(report.members, key=lambda m: m.member_id)
    ]
    widths = [
        _width(rows, 0),
        _width(rows, 1),
        _width(rows, 2),
        _width(rows, 3),
        12,
        *([13] if verbose else []),
    ]
    _table([[*head, "ASSIGNMENT"], *rows], widths)


def _describe_state(report: ShareGroupReport, verbose: bool) -> None:
    epochs = [str(report.group_epoch), str(report.assignment_epoch)] if verbose else []
    head = ["GROUP", "COORDINATOR (ID)", "STATE", *(["GROUP-EPOCH", "ASSIGNMENT-EPOCH"] if verbose else [])]
    row = [report.group_id, report.coordinator, report.state, *epochs]
    widths = [_width([row], 0), 25, 15, *([12, 17] if verbose else [])]
    _table([[*head, "#MEMBERS"], [*row, str(len(report.members))]], widths)
    if not report.members:
        print(f"\nShare group '{report.group_id}' has no active members.", file=sys.stderr)


def _number(value: int) -> str:
    return "-" if value < 0 else str(value)


def _assignment(partitions: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return (
        ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items())) or "-"
    )


def delete(admin: ShareAdmin, args: argparse.Namespace) -> int:
    groups = _groups(admin, args)
    failed: dict[str, int] = {}
    for group in groups:
        code = admin.delete(group)
        if code != ErrorCode.NONE:
            failed[group] = code
    if not failed:
        print(f"Deletion of requested share groups ({', '.join(repr(g) for g in groups)}) was successful.")
        return 0
    print("\nError: Deletion of some share groups failed:")
    for group, code in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {_error_text(group, code)}")
    return 1


def _error_text(group: str, code: int) -> str:
    messages: dict[int, str] = {
        ErrorCode.NON_EMPTY_GROUP: f"Share group '{group}' is not EMPTY.",
        ErrorCode.GROUP_ID_NOT_FOUND: f"Group {group} not found.",
    }
    name = _EXCEPTIONS.get(code, ErrorCode(code).name)
    return f"org.apache.kafka.common.errors.{name}: {messages.get(code, ErrorCode(code).name)}"


def reset_offsets(admin: ShareAdmin, args: argparse.Namespace) -> int:
    status = 0
    for group in _groups(admin, args):
        try:
            report = admin.describe_share(group)
        except KafkaError as exc:
            if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                raise
            status = _not_found(exc)
            continue
        if report.members:
            print(f"Share group '{group}' is not empty.", file=sys.stderr)
            status = 1
            continue
        planned = _plan(admin, group, args)
        if args.execute:
            error, message, errors = admin.alter_start_offsets(group, planned)
            if error != ErrorCode.NONE:
                print(f"Error: {message or ErrorCode(error).name}", file=sys.stderr)
                status = 1
                continue
            failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
            for tp, code in sorted(failed.items()):
                print(
                    f"Error: resetting {tp.topic}-{tp.partition} failed: {ErrorCode(code).name}",
                    file=sys.stderr,
                )
            status = 1 if failed else status
        rows = [[group, tp.topic, str(tp.partition), str(planned[tp])] for tp in java_hash_order(planned)]
        _table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *rows], [_width(rows, 0), _width(rows, 1), 10])
    return status


def _plan(admin: ShareAdmin, group: str, args: argparse.Namespace) -> dict[TopicPartition, int]:
    if args.all_topics:
        topics = sorted({o.tp.topic for o in admin.start_offsets(group)})
    else:
        topics = list(dict.fromkeys(args.topic))
    tps = [tp for topic in topics for tp in admin.partitions(topic, None)]
    if not tps:
        return {}
    if args.to_datetime is not None:
        found = admin.log_offsets(tps, args.to_datetime)
        latest = admin.log_offsets(tps, LATEST)
        return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in tps}
    return admin.log_offsets(tps, EARLIEST if args.to_earliest else LATEST)


def delete_offsets(admin: ShareAdmin, args: argparse.Namespace) -> int:
    group = _groups(admin, args)[0]
    topics = list(dict.fromkeys(args.topic))
    error, message, errors = admin.delete_start_offsets(group, topics)
    if error != ErrorCode.NONE:
        print(f"\nError: Encountered some issues while deleting offsets: {message or ErrorCode(error).name}")
        return 1
    rows = [
        [
            t,
            "Successful"
            if errors.get(t) == ErrorCode.NONE
            else f"Error: {ErrorCode(errors.get(t, -1)).name}",
        ]
        for t in topics
    ]
    _table([["TOPIC", "STATUS"], *rows], [_width(rows, 0)])
    return 0 if all(errors.get(t) == ErrorCode.NONE for t in topics) else 1


ACTIONS: dict[str, Callable[[ShareAdmin, argparse.Namespace], int]] = {
    "list": list_groups,
    "describe": describe,
    "delete": delete,
    "reset_offsets": reset_offsets,
    "delete_offsets": delete_offsets,
}


# -- Kafka's HashMap order ------------------------------------------------------------------------


def _java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hash_order(tps: Sequence[TopicPartition] | dict[TopicPartition, int]) -> list[TopicPartition]:
    """The order a java.util.HashMap<TopicPartition, _> (default capacity, filled in the given order)
    iterates its keys: the order Kafka's tool prints a reset's rows in."""
    keys = list(tps)
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(tp: TopicPartition) -> int:
        h = ((31 * (31 + tp.partition)) + _java_string_hash(tp.topic)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket
