"""`odradek acls`: kafka-acls.sh, with its flags and its output, through CreateAcls, DescribeAcls and
DeleteAcls on the cluster.

    odradek acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t
    odradek acls --bootstrap-server H:P --add --allow-principal User:bob --producer --topic t
    odradek acls --bootstrap-server H:P --add --allow-principal User:bob --consumer --topic t --group g
    odradek acls --bootstrap-server H:P --remove --allow-principal User:alice --topic t --force
    odradek acls --bootstrap-server H:P --list [--topic t] [--principal User:alice]

Resources: `--topic`, `--group`, `--transactional-id` (each repeatable) and `--cluster`, with
`--resource-pattern-type` (LITERAL, the default, PREFIXED; and for --list / --remove the filters ANY
and MATCH). Entries: `--allow-principal` / `--deny-principal` (repeatable, `Type:name`) with
`--allow-host` / `--deny-host` (default `*`) and `--operation` (repeatable, default All). The
conveniences, as Kafka's: `--producer` is WRITE, DESCRIBE and CREATE on the topics (and WRITE,
DESCRIBE on the transactional ids, IDEMPOTENT_WRITE on the cluster with `--idempotent`);
`--consumer` is READ and DESCRIBE on the topics and READ on the groups (a group is required).
An operation a resource type does not support is refused before anything is sent.

Output, as kafka-acls.sh prints it: `Adding ACLs for resource `ResourcePattern(...)`:` then each
entry `(principal=..., host=..., operation=..., permissionType=...)` on a tab-indented line, and
after any change the `Current ACLs for resource ...` of each resource; `--remove` asks
`Are you sure you want to remove ACLs: ... (y/n)` unless `--force`. A refused request (no
authorizer: SECURITY_DISABLED; not allowed: CLUSTER_AUTHORIZATION_FAILED; an invalid binding)
is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from odradek.cli.common import ToolError, add_connection_options, connect, guarded
from odradek.cli.main import UsageError
from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from odradek.security.acl_store import by_pattern
from odradek.security.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    parse_enum,
)
from odradek.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType

COMMAND = "acls"
HELP = "add, remove and list ACLs (kafka-acls)"

_OP = AclOperation
PRODUCER_OPERATIONS = {
    ResourceType.TOPIC: (_OP.WRITE, _OP.DESCRIBE, _OP.CREATE),
    ResourceType.TRANSACTIONAL_ID: (_OP.WRITE, _OP.DESCRIBE),
}
CONSUMER_OPERATIONS = {ResourceType.TOPIC: (_OP.READ, _OP.DESCRIBE), ResourceType.GROUP: (_OP.READ,)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, help_text in (
        ("--topic", "a topic (repeatable)"),
        ("--group", "a consumer group (repeatable)"),
        ("--transactional-id", "a transactional id (repeatable)"),
        ("--allow-principal", "a principal the entries allow, Type:name (repeatable)"),
        ("--deny-principal", "a principal the entries deny, Type:name (repeatable)"),
        ("--allow-host", "a host the allow entries apply to (default *)"),
        ("--deny-host", "a host the deny entries apply to (default *)"),
        ("--operation", "an operation: Read, Write, Create, ... All (repeatable; default All)"),
        ("--principal", "list only the ACLs of this principal (with --list; repeatable)"),
    ):
        parser.add_argument(flag, action="append", default=[], help=help_text)
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        type=lambda text: parse_enum(PatternType, text),
        default=PatternType.LITERAL,
        metavar="LITERAL|PREFIXED|ANY|MATCH",
        help="the pattern type of the resources (default LITERAL)",
    )
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE too")
    parser.add_argument("--force", action="store_true", help="do not ask before removing")


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    return guarded(COMMAND, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if args.add:
        changes = _bindings(args)
        with connect(args, COMMAND) as client:
            for pattern, entries in by_pattern(changes).items():
                _print_entries(f"Adding ACLs for resource `{pattern}`: ", entries)
            _create(client, changes)
            _print_current(client, {b.pattern for b in changes})
        return 0
    if args.remove:
        return _remove(args)
    with connect(args, COMMAND) as client:
        _print_current(client, None, _list_filters(args))
    return 0


def _check_usage(args: argparse.Namespace) -> None:
    resources = args.topic or args.group or args.transactional_id or args.cluster
    if (args.add or args.remove) and not resources:
        raise UsageError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    if args.add and not (args.allow_principal or args.deny_principal):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    if args.add and args.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("A --resource-pattern-type of LITERAL or PREFIXED is required with --add")
    if args.consumer and not args.group:
        raise UsageError("With --consumer you must specify a --group")
    if (args.producer or args.consumer) and args.operation:
        raise UsageError("--operation cannot be used with --producer or --consumer")


def _resources(args: argparse.Namespace) -> list[ResourcePattern]:
    kind = args.resource_pattern_type
    found = [ResourcePattern(ResourceType.TOPIC, t, kind) for t in args.topic]
    found += [ResourcePattern(ResourceType.GROUP, g, kind) for g in args.group]
    found += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, kind) for t in args.transactional_id]
    if args.cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return found


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> tuple[AclOperation, ...]:
    if args.producer:
        if resource_type == ResourceType.CLUSTER:
            return (AclOperation.IDEMPOTENT_WRITE,)
        return PRODUCER_OPERATIONS.get(resource_type, ())
    if args.consumer:
        return CONSUMER_OPERATIONS.get(resource_type, ())
    try:
        wanted = tuple(parse_enum(AclOperation, op) for op in args.operation) or (AclOperation.ALL,)
    except ValueError as exc:
        raise ToolError(f"Error: {exc}") from None
    unsupported = [
        op for op in wanted if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS[resource_type]
    ]
    if unsupported:
        supported = ", ".join(op.name for op in (*SUPPORTED_OPERATIONS[resource_type], AclOperation.ALL))
        raise ToolError(
            f"ResourceType {resource_type.name} only supports operations {supported}, "
            f"not {', '.join(op.name for op in unsupported)}"
        )
    return wanted


def _entries(args: argparse.Namespace, resource_type: ResourceType) -> list[AccessControlEntry]:
    operations = _operations(args, resource_type)
    entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            _check_principal(principal)
            for host in hosts or [WILDCARD_HOST]:
                entries += [AccessControlEntry(principal, host, op, permission) for op in operations]
    return entries


def _check_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not (sep and kind and name):
        raise ToolError(f"Error: Invalid principal {principal!r}: expected Type:name (User:alice)")


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    resources = _resources(args)
    if args.producer and args.idempotent:
        resources.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return [AclBinding(r, e) for r in resources for e in _entries(args, r.resource_type)]


def _create(client: KafkaClient, bindings: list[AclBinding]) -> None:
    request = CreateAclsRequest(
        creations=[
            CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type,
                resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type,
                principal=b.entry.principal,
                host=b.entry.host,
                operation=b.entry.operation,
                permission_type=b.entry.permission_type,
            )
            for b in bindings
        ]
    )
    response = client.request(ApiKey.CREATE_ACLS, request)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, result.error_message)


def _remove(args: argparse.Namespace) -> int:
    filters = _remove_filters(args)
    if not args.force and not _confirmed(args):
        return 0
    with connect(args, COMMAND) as client:
        request = DeleteAclsRequest(
            filters=[_wire_filter(DeleteAclsRequest.DeleteAclsFilter, f) for f in filters]
        )
        response = client.request(ApiKey.DELETE_ACLS, request)
        for result in response.filter_results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(result.error_code, result.error_message)
        _print_current(client, set(_resources(args)))
    return 0


def _confirmed(args: argparse.Namespace) -> bool:
    described = ", ".join(str(r) for r in _resources(args))
    answer = input(f"Are you sure you want to remove ACLs: \n {described} \n (y/n)")
    return answer.strip().lower() == "y"


def _remove_filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """One filter per binding named, or per resource (every ACL of it) when no principal is given."""
    if not (args.allow_principal or args.deny_principal):
        return [_resource_filter(r) for r in _resources(args)]
    return [
        AclBindingFilter(
            b.pattern.resource_type,
            b.pattern.name,
            b.pattern.pattern_type,
            b.entry.principal,
            b.entry.host,
            b.entry.operation,
            b.entry.permission_type,
        )
        for b in _bindings(args)
    ]


def _resource_filter(pattern: ResourcePattern, principal: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type, principal)


def _list_filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    resources = _resources(args)
    principals: list[str | None] = list(args.principal) or [None]
    if not resources:
        return [AclBindingFilter(principal=p) for p in principals]
    return [_resource_filter(r, p) for r in resources for p in principals]


def _wire_filter(kind: type, f: AclBindingFilter) -> object:
    return kind(
        resource_type_filter=f.resource_type,
        resource_name_filter=f.name,
        pattern_type_filter=f.pattern_type,
        principal_filter=f.principal,
        host_filter=f.host,
        operation=f.operation,
        permission_type=f.permission_type,
    )


def _print_current(
    client: KafkaClient,
    patterns: set[ResourcePattern] | None,
    filters: Iterable[AclBindingFilter] | None = None,
) -> None:
    """Kafka's `Current ACLs for resource ...` blocks: of `patterns` (after a change) or of what
    `filters` match (--list)."""
    wanted = (
        list(filters)
        if filters is not None
        else [_resource_filter(p) for p in sorted(patterns or (), key=str)]
    )
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for f in wanted:
        response = client.request(ApiKey.DESCRIBE_ACLS, _wire_filter(DescribeAclsRequest, f))
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_code, response.error_message)
        for resource in response.resources:
            pattern = ResourcePattern(
                ResourceType(resource.resource_type),
                resource.resource_name,
                PatternType(resource.pattern_type),
            )
            found.setdefault(pattern, set()).update(
                AccessControlEntry(
                    a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type)
                )
                for a in resource.acls
            )
    for pattern in patterns or ():
        found.setdefault(pattern, set())
    for pattern, entries in sorted(found.items(), key=lambda item: str(item[0])):
        _print_entries(f"Current ACLs for resource `{pattern}`: ", entries)


def _print_entries(title: str, entries: Iterable[AccessControlEntry]) -> None:
    print(title)
    for entry in sorted(entries, key=str):
        print(f" \t{entry} ")
    print()
    sys.stdout.flush()
