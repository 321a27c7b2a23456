"""`odradek consumer-groups`: kafka-consumer-groups.sh, with its flags and its output.

    odradek consumer-groups --bootstrap-server H:P --list [--state [STATE,...]] [--type [TYPE,...]]
    odradek consumer-groups --bootstrap-server H:P --describe (--group G ... | --all-groups)
        [--offsets | --members [--verbose] | --state]
    odradek consumer-groups --bootstrap-server H:P --delete (--group G ... | --all-groups)
    odradek consumer-groups --bootstrap-server H:P --reset-offsets (--group G ... | --all-groups)
        (--topic T[:P,P] ... | --all-topics) (--to-earliest | --to-latest | --to-current |
        --to-offset N | --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS)
        [--dry-run | --execute]
    odradek consumer-groups --bootstrap-server H:P --delete-offsets --group G --topic T[:P,P] ...

Output as Kafka's ConsumerGroupCommand prints it: its column layouts (GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID; the members and state tables, with
Kafka 4's --verbose columns for a group of the consumer protocol (KIP-848): member epochs, current
and target assignments, the group and target-assignment epochs; the NEW-OFFSET table of a reset),
its notes on stderr ("Consumer group 'g' has no active members.", "is rebalancing", the warning when
neither --dry-run nor --execute is given) and its messages. A reset over many partitions reports
progress on stderr (a line per round of lookups with counts and rate).

Differences from Kafka, deliberate: a group that does not exist, a refused reset (active group) and
a failed deletion exit with status 1 (Kafka prints the error and exits 0); a failed deletion's
`* Group 'g' could not be deleted due to: ...` lines go to stderr under their headline (Kafka prints
them on stdout); rows of the offsets table are sorted by topic and partition. --from-file and
--export are not supported. Share groups are left out of --list, as Kafka's tool leaves them
(`odradek share-groups` lists them).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from odradek.cli.common import ToolError, add_connection_options, connect, guarded
from odradek.cli.main import UsageError
from odradek.cli.progress import Progress
from odradek.client import TopicPartition
from odradek.client.group_admin import GroupAdmin, GroupListing, GroupReport, Member, ResetTarget
from odradek.protocol.errors import ErrorCode, error_name

COMMAND = "consumer-groups"
HELP = "list, describe and delete consumer groups, reset and delete their offsets (kafka-consumer-groups)"

DEFAULT_TIMEOUT_MS = 5000
NO_ACTION_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the "
    "default behavior of this command will be to prompt the user before executing the reset rather than "
    "doing a dry run. You should add the --dry-run option explicitly if you are scripting this command "
    "and want to keep the current default behavior without prompting."
)
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_TARGETS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT_MS,
        metavar="MS",
        help="wait this long for a coordinator",
    )
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in _ACTIONS:
        actions.add_argument(f"--{action.replace('_', '-')}", action="store_true")
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group")
    parser.add_argument(
        "--topic", action="append", default=[], type=topic_spec, metavar="T[:P,P]", help="repeatable"
    )
    parser.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    views = parser.add_mutually_exclusive_group()
    views.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    views.add_argument("--members", action="store_true", help="--describe: the members")
    views.add_argument(
        "--state", nargs="?", const="", metavar="STATE,...", help="--describe: the state; --list: filter"
    )
    parser.add_argument(
        "--type",
        nargs="?",
        const="",
        metavar="TYPE,...",
        help="--list: each group's type (classic, consumer)",
    )
    parser.add_argument("--verbose", action="store_true", help="--members: with their partitions")
    targets = parser.add_mutually_exclusive_group()
    for flag in ("to_earliest", "to_latest", "to_current"):
        targets.add_argument(f"--{flag.replace('_', '-')}", action="store_true")
    targets.add_argument("--to-offset", type=int, metavar="N")
    targets.add_argument("--shift-by", type=int, metavar="N")
    targets.add_argument("--to-datetime", type=_datetime_ms, metavar="YYYY-MM-DDTHH:mm:SS.sss")
    targets.add_argument("--by-duration", type=_duration_ms, metavar="PnDTnHnMnS")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    modes.add_argument("--execute", action="store_true", help="commit the new offsets")


def run(args: argparse.Namespace) -> int:
    action = next(a for a in _ACTIONS if getattr(args, a))
    _check_usage(args, action)

    def body() -> int:
        with connect(args, COMMAND) as client:
            return ACTIONS[action](GroupAdmin(client, args.timeout / 1000), args)

    return guarded(COMMAND, body)


def default_options() -> argparse.Namespace:
    """Every option at its default, for a caller that runs ACTIONS with options of its own."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "localhost:9092", "--list"])


def _check_usage(args: argparse.Namespace, action: str) -> None:
    if action != "list" and not (args.group or args.all_groups):
        raise UsageError("--group or --all-groups is required")
    if action == "reset_offsets":
        if not any(getattr(args, t) not in (None, False) for t in _TARGETS):
            raise UsageError(
                "one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, "
                "--to-datetime, --by-duration is required with --reset-offsets"
            )
        if not (args.topic or args.all_topics):
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if action == "delete_offsets" and (not args.topic or len(args.group) != 1):
        raise UsageError("--delete-offsets needs one --group and --topic")


def topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """argparse `type=` of --topic: `TOPIC` or `TOPIC:P,P...` into (topic, partitions or None)."""
    topic, _, partitions = spec.partition(":")
    if not partitions:
        return topic, None
    try:
        return topic, [int(p) for p in partitions.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad partition list in {spec!r}; expected TOPIC[:P,P...]") from None


def _datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: ISO 8601 with milliseconds, the local time zone when none is given."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DDTHH:mm:SS.sss, got {text!r}") from None
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def _duration_ms(text: str) -> int:
    """Kafka's --by-duration (ISO 8601 PnDTnHnMnS) as milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT"):
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 duration PnDTnHnMnS, got {text!r}")
    days, hours, minutes, seconds = (float(g or 0) for g in match.groups())
    return int(timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds).total_seconds() * 1000)


# ---------------------------------------------------------------------------------------------
# the actions


def list_groups(admin: GroupAdmin, args: argparse.Namespace) -> int:
    """The group ids; with --state and --type, Kafka's table of them (each a filter when given values)."""
    listed = [g for g in admin.list_groups() if g.group_type in ("classic", "consumer")]  # as Kafka's tool
    if args.state is None and args.type is None:
        for group in listed:
            print(group.group_id)
        return 0
    states, types = _wanted(args.state), _wanted(args.type)
    shown = [g for g in listed if _kept(g.state, states) and _kept(g.group_type, types)]
    columns: list[tuple[str, Callable[[GroupListing], str]]] = [("GROUP", lambda g: g.group_id)]
    if args.type is not None:
        columns.append(("TYPE", lambda g: g.group_type.capitalize()))
    if args.state is not None:
        columns.append(("STATE", lambda g: g.state))
    rows = [[name for name, _ in columns], *([cell(g) for _, cell in columns] for g in shown)]
    widths = [_width(rows[1:], 0), *([20] * (len(columns) - 2))]
    for row in rows:
        print(_padded(row, widths))
    return 0


def _wanted(values: str | None) -> set[str]:
    return {v.strip().lower() for v in (values or "").split(",") if v.strip()}


def _kept(value: str, wanted: set[str]) -> bool:
    return not wanted or value.lower() in wanted


def describe(admin: GroupAdmin, args: argparse.Namespace) -> int:
    show, rows = _view(args)
    status = 0
    for group in _groups(admin, args):
        report = admin.describe(group)
        if not _announce_state(report):
            status = 1
        elif rows(report):
            show(report, args.verbose)
    return status


def _view(
    args: argparse.Namespace,
) -> tuple[Callable[[GroupReport, bool], None], Callable[[GroupReport], int]]:
    """The table --describe prints, and how many rows a group has in it (none: no table, as Kafka)."""
    if args.members:
        return _members_table, lambda report: len(report.members)
    if args.state is not None:
        return _state_table, lambda _report: 1
    return _offsets_table, lambda report: len(report.rows)


def _announce_state(report: GroupReport) -> bool:
    """Kafka's note about the group's state on stderr; False for a group that does not exist."""
    if report.state == "Dead":
        print(f"\nError: Consumer group '{report.group}' does not exist.", file=sys.stderr)
        return False
    if report.state == "Empty":
        print(f"\nConsumer group '{report.group}' has no active members.", file=sys.stderr)
    elif report.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{report.group}' is rebalancing.", file=sys.stderr)
    return True


def _offsets_table(report: GroupReport, _verbose: bool) -> None:
    cells = [
        [
            report.group,
            "-" if row.tp is None else row.tp.topic,
            "-" if row.tp is None else str(row.tp.partition),
            _or_dash(row.committed),
            _or_dash(row.log_end_offset),
            _or_dash(row.lag),
            row.consumer_id,
            row.host,
            row.client_id,
        ]
        for row in report.rows
    ]
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"]
    widths = [_width(cells, 0), _width(cells, 1), 10, 15, 15, 15, _width(cells, 6), _width(cells, 7)]
    print()
    for line in [[*header, "CLIENT-ID"], *cells]:
        print(_padded(line, widths))
    print()


def _members_table(report: GroupReport, verbose: bool) -> None:
    """Kafka's members table; a consumer-protocol group's --verbose columns are Kafka 4's: each member's
    epoch and assignment, and the target assignment it reconciles towards with the group's epoch of it."""
    with_instances = any(m.instance_id for m in report.members)
    cells = [
        [
            report.group,
            m.member_id,
            *([m.instance_id or "-"] if with_instances else []),
            m.host,
            m.client_id,
            str(len(m.partitions)),
            *(_verbose_member_cells(report, m) if verbose else []),
        ]
        for m in report.members
    ]
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instances else []), "HOST", "CLIENT-ID"]
    widths = [_width(cells, i, 17 if header[i] == "GROUP-INSTANCE-ID" else 15) for i in range(len(header))]
    widths.append(15)
    verbose_header = ["ASSIGNMENT"]
    if report.consumer_protocol:
        verbose_header = ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        widths += [15, 20, 15, 20] if verbose else []
    print()
    for line in [[*header, "#PARTITIONS", *(verbose_header if verbose else [])], *cells]:
        print(_padded(line[: len(widths)], widths, strip=False) + " " + "".join(line[len(widths) :]))
    print()


def _verbose_member_cells(report: GroupReport, member: Member) -> list[str]:
    if not report.consumer_protocol:
        return [_assignment(member.partitions)]
    return [
        _or_dash(member.member_epoch),
        _topic_partitions(member.partitions),
        _or_dash(report.assignment_epoch),
        _topic_partitions(member.target),
    ]


def _state_table(report: GroupReport, verbose: bool) -> None:
    """Kafka's state table; with --verbose, a consumer-protocol group's epochs (Kafka 4's columns)."""
    epochs = verbose and report.consumer_protocol
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row = [report.group, report.coordinator, report.protocol, report.state]
    if epochs:
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [_or_dash(report.group_epoch), _or_dash(report.assignment_epoch)]
    first = max(25, len(report.coordinator))
    for line in (header + ["#MEMBERS"], row + [str(len(report.members))]):
        print()
        print(_padded(line, [first, 25, 20, 15, *([15, 25] if epochs else [])]), end="")
    print()


def delete(admin: GroupAdmin, args: argparse.Namespace) -> int:
    groups = _groups(admin, args)
    errors = {group: admin.delete(group) for group in groups}
    failed = {g: code for g, code in errors.items() if code != ErrorCode.NONE}
    if not failed:
        names = "', '".join(groups)
        print(f"Deletion of requested consumer groups ('{names}') was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, code in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {error_name(code)}", file=sys.stderr)
    deleted = [g for g in groups if g not in failed]
    if deleted:
        names = "', '".join(deleted)
        print(f"\nThese consumer groups were deleted successfully: '{names}'")
    return 1


def reset_offsets(admin: GroupAdmin, args: argparse.Namespace) -> int:
    if not (args.dry_run or args.execute):
        print(NO_ACTION_WARNING, file=sys.stderr)
    target = _reset_target(args)
    planned: dict[str, dict[TopicPartition, int]] = {}
    for group in _groups(admin, args):
        report = admin.describe(group)
        if args.execute and report.state not in ("Empty", "Dead"):
            raise ToolError(
                f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {report.state}."
            )
        tps = _reset_scope(admin, args, report)
        progress = Progress(f"odradek {COMMAND}: group '{group}': new offsets for", len(tps), "partitions")
        planned[group] = admin.plan_reset(tps, target, report.committed, progress.advance)
        if args.execute:
            _commit(admin, group, planned[group])
    _print_new_offsets(planned)
    return 0


def _reset_target(args: argparse.Namespace) -> ResetTarget:
    if args.to_datetime is not None:
        return ResetTarget("time", args.to_datetime)
    if args.by_duration is not None:
        return ResetTarget("time", int(time.time() * 1000) - args.by_duration)
    if args.to_offset is not None:
        return ResetTarget("offset", args.to_offset)
    if args.shift_by is not None:
        return ResetTarget("shift", args.shift_by)
    return ResetTarget(next(k for k in ("earliest", "latest", "current") if getattr(args, f"to_{k}")))


def _reset_scope(admin: GroupAdmin, args: argparse.Namespace, report: GroupReport) -> list[TopicPartition]:
    if args.all_topics:
        topics = sorted(
            {tp.topic for tp in report.committed} | {tp.topic for m in report.members for tp in m.partitions}
        )
        return [tp for topic in topics for tp in admin.partitions(topic, None)]
    return [tp for topic, partitions in args.topic for tp in admin.partitions(topic, partitions)]


def _commit(admin: GroupAdmin, group: str, offsets: dict[TopicPartition, int]) -> None:
    failed = {tp: code for tp, code in admin.commit(group, offsets).items() if code != ErrorCode.NONE}
    if failed:
        details = ", ".join(
            f"{tp.topic}-{tp.partition}: {error_name(code)}" for tp, code in sorted(failed.items())
        )
        raise ToolError(f"Error: committing the offsets of '{group}' failed: {details}")


def _print_new_offsets(planned: dict[str, dict[TopicPartition, int]]) -> None:
    widths = [30, 30, 10, 15]
    if planned:
        print()
        print(_padded(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], widths, strip=False))
    for group, offsets in planned.items():
        for tp, offset in sorted(offsets.items()):
            print(_padded([group, tp.topic, str(tp.partition), str(offset)], widths, strip=False))
    print()


def delete_offsets(admin: GroupAdmin, args: argparse.Namespace) -> int:
    (group,) = args.group
    tps = [tp for topic, partitions in args.topic for tp in admin.partitions(topic, partitions)]
    code, errors = admin.delete_offsets(group, tps)
    topics = ", ".join(dict.fromkeys(t for t, _ in args.topic))
    message = _delete_offsets_error(code, group)
    if message is None:
        print(f"Request succeed for deleting offsets with topic {topics} group {group}")
    else:
        print(f"\nError: {message}", file=sys.stderr)
    print()
    print(_padded(["TOPIC", "PARTITION", "STATUS"], [30, 15, 15], strip=False))
    for tp in sorted(errors):
        status = "Successful" if errors[tp] == ErrorCode.NONE else f"Error: {error_name(errors[tp])}"
        print(_padded([tp.topic, str(tp.partition), status], [30, 15, 15], strip=False))
    return 0 if code == ErrorCode.NONE and all(c == ErrorCode.NONE for c in errors.values()) else 1


_PARTITION_LEVEL = "Encounter some partition level error, see the follow-up details:"


def _delete_offsets_error(code: int, group: str) -> str | None:
    """Kafka's message for the top-level error of an offset deletion (None: no error)."""
    return {
        ErrorCode.NONE: None,
        ErrorCode.INVALID_GROUP_ID: f"'{group}' is not valid.",
        ErrorCode.GROUP_ID_NOT_FOUND: f"'{group}' does not exist.",
        ErrorCode.NON_EMPTY_GROUP: (
            f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
        ),
        ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: _PARTITION_LEVEL,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: _PARTITION_LEVEL,
    }.get(code, f"Encounter some unknown error: {error_name(code)}")


ACTIONS: dict[str, Callable[[GroupAdmin, argparse.Namespace], int]] = {
    "list": list_groups,
    "describe": describe,
    "delete": delete,
    "reset_offsets": reset_offsets,
    "delete_offsets": delete_offsets,
}


# ---------------------------------------------------------------------------------------------
# formatting


def _groups(admin: GroupAdmin, args: argparse.Namespace) -> list[str]:
    return [g.group_id for g in admin.list_groups()] if args.all_groups else list(dict.fromkeys(args.group))


def _width(cells: Sequence[Sequence[str]], column: int, least: int = 15) -> int:
    return max([least, *(len(row[column]) for row in cells)])


def _padded(cells: Sequence[str], widths: Sequence[int], *, strip: bool = True) -> str:
    """Kafka's `%-Ns %-Ns ... %s`: each cell left-justified to its width, the cell past the widths as is."""
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    line = " ".join(padded + list(cells[len(widths) :]))
    return line if not strip or len(cells) > len(widths) else line.rstrip()


def _assignment(partitions: Sequence[TopicPartition]) -> str:
    if not partitions:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items()))


def _topic_partitions(partitions: Sequence[TopicPartition]) -> str:
    """Kafka 4's `t:0,1;u:2` for a consumer-protocol member's partitions, `-` for none."""
    if not partitions:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(str(p) for p in ps)}" for t, ps in by_topic.items())


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
