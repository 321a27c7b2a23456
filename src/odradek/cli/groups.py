"""`odradek groups`: consumer groups from the command line, like kafka-consumer-groups.sh.

    odradek groups list --bootstrap-server HOST:PORT [--state]
    odradek groups describe --bootstrap-server HOST:PORT GROUP
    odradek groups delete --bootstrap-server HOST:PORT GROUP
    odradek groups reset-offsets --bootstrap-server HOST:PORT --group G --topic T[:P,P...]
        (--to-earliest | --to-latest | --to-offset N) [--dry-run | --execute]

The connection options (--bootstrap-server, --timeout, --connect-timeout) go before or after the
action, as the user likes (`odradek groups --bootstrap-server X list` works too).

`describe` shows, per partition the group has committed or is assigned, the committed offset
(CURRENT-OFFSET), the log end offset (the high watermark, what a consumer can reach), the lag and
the member that owns it. `reset-offsets` computes new offsets (a `--to-offset` outside the log is
clamped to the earliest / latest offset, as Kafka does), prints them and, with `--execute`, commits
them; it refuses a group that has active members. Exit status: 0 on success, 1 on a failure
reported by the cluster or a cluster that cannot be reached, 2 on a usage error (a malformed
--bootstrap-server among them).

Talks the Kafka protocol through `odradek.client.KafkaClient`: it first reaches a bootstrap server,
retrying for --connect-timeout seconds and saying so on stderr, one line per retry (an unknown host
is reported at once); then metadata and log offsets through the client, and the group APIs
(FindCoordinator, ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups) as plain
requests on the client's broker connections. Coordinator errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) are retried until --timeout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.cli.main import UsageError, seconds_option
from odradek.client import KafkaClient, TopicPartition, bootstrap_option
from odradek.client.connection import BrokerConnection
from odradek.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assignment_partitions
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

COMMAND = "groups"
HELP = "list, describe and delete consumer groups, reset their committed offsets"

CLIENT_ID = "odradek-groups"
EARLIEST, LATEST = -2, -1
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
_BACKOFF_S = 0.1
T = TypeVar("T")


def _connection_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every action takes; given at the action level they win over the group level.

    At the action level they default to SUPPRESS, so an option given before the action is kept."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_option,
        default=default(None),
        metavar="HOST:PORT[,HOST:PORT...]",
        help="brokers to start from (required)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds_option,
        default=default(30.0),
        metavar="SECONDS",
        help="give up on a request after this long (default 30)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=seconds_option,
        default=default(5.0),
        metavar="SECONDS",
        help="keep trying to reach a bootstrap server this long (default 5)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_options(parser, defaults=True)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the groups")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    actions.add_parser("describe", help="offsets, lag and members of a group").add_argument("group")
    actions.add_parser("delete", help="delete a group that has no members").add_argument("group")
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True, type=_topic_spec, metavar="TOPIC[:P,P...]")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    for action in actions.choices.values():
        _connection_options(action, defaults=False)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap_server is None:
        raise UsageError("the following arguments are required: --bootstrap-server")
    try:
        with GroupAdmin(args.bootstrap_server, args.timeout, args.connect_timeout) as admin:
            return _ACTIONS[args.action](admin, args)
    except OSError as exc:  # BrokerUnreachable, ConnectFailed, a connection broken mid-way
        print(f"odradek groups: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _announce_retry(line: str) -> None:
    print(f"odradek groups: {line}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# the actions


def _list(admin: GroupAdmin, args: argparse.Namespace) -> int:
    groups = admin.list_groups()
    if args.state:
        _print_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in groups])
    else:
        for group in groups:
            print(group.group_id)
    return 0


def _describe(admin: GroupAdmin, args: argparse.Namespace) -> int:
    report = admin.describe(args.group)
    if report.state == "Dead":
        print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1
    if report.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{args.group}' is rebalancing.")
    elif report.state == "Empty":
        print(f"\nConsumer group '{args.group}' has no active members.")
    print()
    header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    _print_table(header, [[args.group, *row.cells()] for row in report.rows])
    return 0


def _delete(admin: GroupAdmin, args: argparse.Namespace) -> int:
    error = admin.delete(args.group)
    if error != ErrorCode.NONE:
        name = ErrorCode(error).name
        print(f"Error: Deletion of consumer group '{args.group}' failed: {name}", file=sys.stderr)
        return 1
    print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0


def _reset_offsets(admin: GroupAdmin, args: argparse.Namespace) -> int:
    topic, partitions = args.topic
    target = EARLIEST if args.to_earliest else LATEST if args.to_latest else args.to_offset
    state = admin.describe(args.group, with_offsets=False).state
    if args.execute and state not in ("Empty", "Dead"):
        print(
            f"Error: Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {state}.",
            file=sys.stderr,
        )
        return 1
    planned = admin.plan_reset(topic, partitions, target)
    if args.execute:
        failed = {
            tp: code for tp, code in admin.commit(args.group, planned).items() if code != ErrorCode.NONE
        }
        if failed:
            for tp, code in sorted(failed.items()):
                print(f"Error: committing {tp} failed: {ErrorCode(code).name}", file=sys.stderr)
            return 1
    else:
        print("Dry run: no offsets are committed without --execute.", file=sys.stderr)
    rows = [[args.group, tp.topic, str(tp.partition), str(offset)] for tp, offset in sorted(planned.items())]
    _print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    return 0


_ACTIONS: dict[str, Callable[[GroupAdmin, argparse.Namespace], int]] = {
    "list": _list,
    "describe": _describe,
    "delete": _delete,
    "reset-offsets": _reset_offsets,
}


def _topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """argparse `type=` of --topic: `TOPIC` or `TOPIC:P,P...` into (topic, partitions or None)."""
    topic, _, partitions = spec.partition(":")
    if not partitions:
        return topic, None
    try:
        return topic, [int(p) for p in partitions.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad partition list in {spec!r}; expected TOPIC[:P,P...]") from None


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    for line in [header, *rows]:
        print(" ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


# ---------------------------------------------------------------------------------------------
# talking to the cluster


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str


@dataclass(frozen=True, slots=True)
class PartitionRow:
    tp: TopicPartition
    committed: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str

    def cells(self) -> list[str]:
        lag = None
        if self.committed is not None and self.log_end_offset is not None:
            lag = max(self.log_end_offset - self.committed, 0)
        return [
            self.tp.topic,
            str(self.tp.partition),
            _or_dash(self.committed),
            _or_dash(self.log_end_offset),
            _or_dash(lag),
            self.consumer_id,
            self.host,
            self.client_id,
        ]


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class GroupReport:
    state: str
    rows: tuple[PartitionRow, ...]


class _CoordinatorMoved(Exception):
    pass


class GroupAdmin:
    """The group operations of the CLI against one cluster."""

    def __init__(self, bootstrap_servers: str, timeout_s: float, connect_timeout_s: float) -> None:
        """Reach the cluster first: BrokerUnreachable (one line) when no bootstrap server answers."""
        self._timeout_s = timeout_s
        self._client = KafkaClient.connect(
            bootstrap_servers,
            retry_for_s=connect_timeout_s,
            on_retry=_announce_retry,
            client_id=CLIENT_ID,
            timeout_s=timeout_s,
        )

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def _with_coordinator(self, group: str, call: Callable[[BrokerConnection], T]) -> T:
        """`call` against the group's coordinator, finding it again while it moves or loads."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            found = self._client.any_connection().request(
                ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0)
            )
            try:
                if found.error_code in _COORDINATOR_ERRORS:
                    raise _CoordinatorMoved
                _check(found.error_code, f"finding the coordinator of '{group}'")
                return call(self._client.connect_to(found.host, found.port))
            except _CoordinatorMoved:
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise KafkaError(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator for '{group}'"
                    ) from None
                time.sleep(_BACKOFF_S)

    # -- list ---------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        groups: dict[str, GroupListing] = {}
        for broker in self._client.metadata([]).brokers.values():
            response = self._client.connect_to(broker.host, broker.port).request(
                ApiKey.LIST_GROUPS, ListGroupsRequest()
            )
            _check(response.error_code, f"listing the groups of broker {broker.node_id}")
            groups.update((g.group_id, GroupListing(g.group_id, g.group_state)) for g in response.groups)
        return sorted(groups.values(), key=lambda g: g.group_id)

    # -- describe -----------------------------------------------------------------------------

    def describe(self, group: str, *, with_offsets: bool = True) -> GroupReport:
        def describe_at(connection: BrokerConnection) -> tuple[Any, dict[TopicPartition, int]]:
            described = connection.request(
                ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group])
            ).groups[0]
            _raise_if_moved(described.error_code)
            _check(described.error_code, f"describing '{group}'")
            return described, (self._committed(connection, group) if with_offsets else {})

        described, committed = self._with_coordinator(group, describe_at)
        owners = _owners(described)
        partitions = sorted(set(committed) | set(owners))
        log_end = self._log_end_offsets(partitions)
        rows = tuple(
            PartitionRow(tp, committed.get(tp), log_end.get(tp), *owners.get(tp, ("-", "-", "-")))
            for tp in partitions
        )
        return GroupReport(described.group_state, rows)

    def _committed(self, connection: BrokerConnection, group: str) -> dict[TopicPartition, int]:
        response = connection.request(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None))
        _raise_if_moved(response.error_code)
        _check(response.error_code, f"fetching the offsets of '{group}'")
        return {
            TopicPartition(t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    def _log_end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        existing = [tp for tp in partitions if tp.partition < self._client.partition_count(tp.topic)]
        if not existing:
            return {}
        return self._client.list_offsets({tp: LATEST for tp in existing})

    # -- delete and reset ---------------------------------------------------------------------

    def delete(self, group: str) -> int:
        def delete_at(connection: BrokerConnection) -> int:
            result = connection.request(
                ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group])
            ).results[0]
            _raise_if_moved(result.error_code)
            return int(result.error_code)

        return self._with_coordinator(group, delete_at)

    def plan_reset(self, topic: str, partitions: list[int] | None, target: int) -> dict[TopicPartition, int]:
        count = self._client.partition_count(topic)
        if count == 0:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist")
        tps = [TopicPartition(topic, p) for p in (partitions if partitions is not None else range(count))]
        earliest = self._client.list_offsets({tp: EARLIEST for tp in tps})
        latest = self._client.list_offsets({tp: LATEST for tp in tps})
        if target in (EARLIEST, LATEST):
            return dict(earliest if target == EARLIEST else latest)
        return {tp: min(max(target, earliest[tp]), latest[tp]) for tp in tps}

    def commit(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=offset
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )

        def commit_at(connection: BrokerConnection) -> dict[TopicPartition, int]:
            response = connection.request(ApiKey.OFFSET_COMMIT, request)
            errors = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            for code in errors.values():
                _raise_if_moved(code)
            return errors

        return self._with_coordinator(group, commit_at)


def _owners(described: Any) -> dict[TopicPartition, tuple[str, str, str]]:
    """Partition -> (member id, host, client id) from the members' consumer-protocol assignments."""
    if described.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return {}
    owners = {}
    for member in described.members:
        for topic, partitions in (assignment_partitions(member.member_assignment) or {}).items():
            for partition in partitions:
                owners[TopicPartition(topic, partition)] = (
                    member.member_id,
                    member.client_host,
                    member.client_id,
                )
    return owners


def _raise_if_moved(code: int) -> None:
    if code in _COORDINATOR_ERRORS:
        raise _CoordinatorMoved


def _check(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(code, f"{what} failed: {ErrorCode(code).name}")
