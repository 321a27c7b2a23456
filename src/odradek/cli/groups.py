"""`odradek groups`: consumer groups from the command line, like kafka-consumer-groups.sh.

    odradek groups --bootstrap-server HOST:PORT list [--state]
    odradek groups --bootstrap-server HOST:PORT describe GROUP
    odradek groups --bootstrap-server HOST:PORT delete GROUP
    odradek groups --bootstrap-server HOST:PORT reset-offsets --group G --topic T[:P,P...]
        (--to-earliest | --to-latest | --to-offset N) [--dry-run | --execute]

`describe` shows, per partition the group has committed or is assigned, the committed offset
(CURRENT-OFFSET), the log end offset (the high watermark, what a consumer can reach), the lag and
the member that owns it. `reset-offsets` computes new offsets (a `--to-offset` outside the log is
clamped to the earliest / latest offset, as Kafka does), prints them and, with `--execute`, commits
them; it refuses a group that has active members. Exit status: 0 on success, 1 on a failure
reported by the cluster, 2 on a usage error.

Talks the Kafka protocol: metadata and log offsets through `odradek.client.KafkaClient`, the group
APIs (FindCoordinator, ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups) over a
small private connection here, since the shared client does not speak them. Coordinator errors
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) are retried until the
timeout.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.client import KafkaClient, TopicPartition, parse_bootstrap
from odradek.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assignment_partitions
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)
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
_VERSIONS = {
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.DELETE_GROUPS: 2,
}
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
_BACKOFF_S = 0.1
_SIZE = struct.Struct(">i")
T = TypeVar("T")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker to start from"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="give up after this long"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the groups")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    actions.add_parser("describe", help="offsets, lag and members of a group").add_argument("group")
    actions.add_parser("delete", help="delete a group that has no members").add_argument("group")
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True, metavar="TOPIC[:P,P...]")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def run(args: argparse.Namespace) -> int:
    try:
        with GroupAdmin(args.bootstrap_server, args.timeout) as admin:
            return _ACTIONS[args.action](admin, args)
    except (KafkaError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


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
    topic, partitions = _parse_topic(args.topic)
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


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    topic, _, partitions = spec.partition(":")
    if not partitions:
        return topic, None
    try:
        return topic, [int(p) for p in partitions.split(",")]
    except ValueError:
        raise SystemExit(f"odradek groups: bad partition list in --topic {spec!r}") from None


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


class _Connection:
    """One blocking connection speaking the group APIs at fixed versions odradek serves."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation_id = 0

    def close(self) -> None:
        self._sock.close()

    def request(self, api_key: ApiKey, message: Any) -> Any:
        version = _VERSIONS[api_key]
        self._correlation_id += 1
        header = encode_request_header(RequestHeader(api_key, version, self._correlation_id, CLIENT_ID))
        body = encode_request(api_key, version, message)
        self._sock.sendall(_SIZE.pack(len(header) + len(body)) + header + body)
        payload = self._receive(_SIZE.unpack(self._receive(4))[0])
        correlation_id, start = parse_response_header(payload, response_header_version(api_key, version))
        if correlation_id != self._correlation_id:
            raise ConnectionError(f"expected correlation id {self._correlation_id}, got {correlation_id}")
        return decode_response(api_key, version, payload[start:])

    def _receive(self, size: int) -> memoryview:
        buf = memoryview(bytearray(size))
        filled = 0
        while filled < size:
            got = self._sock.recv_into(buf[filled:])
            if got == 0:
                raise ConnectionError("the broker closed the connection")
            filled += got
        return buf


class _CoordinatorMoved(Exception):
    pass


class GroupAdmin:
    """The group operations of the CLI against one cluster."""

    def __init__(self, bootstrap_servers: str, timeout_s: float) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._timeout_s = timeout_s
        self._client = KafkaClient(bootstrap_servers, client_id=CLIENT_ID, timeout_s=timeout_s)
        self._connections: dict[tuple[str, int], _Connection] = {}

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()
        for connection in self._connections.values():
            connection.close()

    def _connection(self, host: str, port: int) -> _Connection:
        if (host, port) not in self._connections:
            self._connections[(host, port)] = _Connection(host, port, self._timeout_s)
        return self._connections[(host, port)]

    def _with_coordinator(self, group: str, call: Callable[[_Connection], T]) -> T:
        """`call` against the group's coordinator, finding it again while it moves or loads."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            host, port = self._bootstrap[0]
            found = self._connection(host, port).request(
                ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0)
            )
            try:
                if found.error_code in _COORDINATOR_ERRORS:
                    raise _CoordinatorMoved
                _check(found.error_code, f"finding the coordinator of '{group}'")
                return call(self._connection(found.host, found.port))
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
            response = self._connection(broker.host, broker.port).request(
                ApiKey.LIST_GROUPS, ListGroupsRequest()
            )
            _check(response.error_code, f"listing the groups of broker {broker.node_id}")
            groups.update((g.group_id, GroupListing(g.group_id, g.group_state)) for g in response.groups)
        return sorted(groups.values(), key=lambda g: g.group_id)

    # -- describe -----------------------------------------------------------------------------

    def describe(self, group: str, *, with_offsets: bool = True) -> GroupReport:
        def describe_at(connection: _Connection) -> tuple[Any, dict[TopicPartition, int]]:
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

    def _committed(self, connection: _Connection, group: str) -> dict[TopicPartition, int]:
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
        def delete_at(connection: _Connection) -> int:
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

        def commit_at(connection: _Connection) -> dict[TopicPartition, int]:
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
