"""The console's ACL page (`/acls`): every ACL binding of the cluster (DescribeAcls matching any),
filtered by resource type, resource name (a part of it) and principal (a part of it); a form that
creates one binding (CreateAcls) and, on each row, a button that deletes exactly that binding
(DeleteAcls with a filter naming every field of it). The forms are hidden in read-only mode; a
refused change (no authorizer, or the session's principal may not alter ACLs) is flashed.

The names and codes of resource types, pattern types, operations and permissions are Kafka's (the
wire codes of the ACL APIs), defined here: the console layer does not import odradek.security.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from aiohttp import web

from odradek.console.reader import ClusterReader
from odradek.console.web import FormError, page
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, check
from odradek.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

ANY = 1  # the ANY code of every ACL enum
CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = {
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
PATTERN_TYPES = {"LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
}
PERMISSIONS = {"ALLOW": 3, "DENY": 2}
# Kafka's AclEntry.supportedOperations (ALL is allowed on every type)
SUPPORTED_OPERATIONS = {
    "TOPIC": (
        "READ",
        "WRITE",
        "CREATE",
        "DESCRIBE",
        "DELETE",
        "ALTER",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    ),
    "GROUP": ("READ", "DESCRIBE", "DELETE"),
    "CLUSTER": (
        "CREATE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "ALTER",
        "DESCRIBE",
    ),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE"),
    "DELEGATION_TOKEN": ("DESCRIBE",),
    "USER": ("CREATE_TOKENS", "DESCRIBE_TOKENS"),
}
FILTERS = ("type", "name", "principal")  # the list's query: resource type, part of a name, of a principal
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")

routes = web.RouteTableDef()


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL binding, by Kafka's names."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def fields(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in FIELDS}


def _name(codes: Mapping[str, int], code: int) -> str:
    return next((name for name, value in codes.items() if value == code), f"UNKNOWN({code})")


def list_acls(reader: ClusterReader) -> list[Acl]:
    """Every ACL binding of the cluster (DescribeAcls with a filter matching any)."""
    request = DescribeAclsRequest(
        resource_type_filter=ANY, pattern_type_filter=ANY, operation=ANY, permission_type=ANY
    )
    response = reader.kafka().request(ApiKey.DESCRIBE_ACLS, request)
    check(response.error_code, response.error_message)
    return sorted(
        Acl(
            _name(RESOURCE_TYPES, resource.resource_type),
            resource.resource_name,
            _name(PATTERN_TYPES, resource.pattern_type),
            acl.principal,
            acl.host,
            _name(OPERATIONS, acl.operation),
            _name(PERMISSIONS, acl.permission_type),
        )
        for resource in response.resources
        for acl in resource.acls
    )


def _wire(acl: Acl) -> tuple[int, str, int, str, str, int, int]:
    """`acl` as CreateAcls' creation and DeleteAcls' filter both carry it, in their fields' order:
    resource type, name, pattern type, principal, host, operation, permission (codes for names)."""
    return (
        RESOURCE_TYPES[acl.resource_type],
        acl.resource_name,
        PATTERN_TYPES[acl.pattern_type],
        acl.principal,
        acl.host,
        OPERATIONS[acl.operation],
        PERMISSIONS[acl.permission],
    )


def create_acl(reader: ClusterReader, acl: Acl) -> None:
    request = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(*_wire(acl))])
    response = reader.kafka().request(ApiKey.CREATE_ACLS, request)
    for result in response.results:
        check(result.error_code, result.error_message)


def delete_acl(reader: ClusterReader, acl: Acl) -> None:
    """Delete exactly `acl` (a filter naming each of its fields); RESOURCE_NOT_FOUND when there was
    no such binding."""
    request = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(*_wire(acl))])
    response = reader.kafka().request(ApiKey.DELETE_ACLS, request)
    deleted = 0
    for result in response.filter_results:
        check(result.error_code, result.error_message)
        for matching in result.matching_acls:
            check(matching.error_code, matching.error_message)
            deleted += 1
    if not deleted:
        raise KafkaError(ErrorCode.RESOURCE_NOT_FOUND, f"there is no ACL {describe(acl)}")


def describe(acl: Acl) -> str:
    return (
        f"{acl.permission} {acl.principal} from {acl.host} {acl.operation} on "
        f"{acl.resource_type} {acl.pattern_type} {acl.resource_name!r}"
    )


def acl_of(form: Mapping[str, object]) -> Acl:
    """The binding a form names, checked; FormError when a field is missing or unknown."""
    values = {name: str(form.get(name, "")).strip() for name in FIELDS}
    for name, codes in (
        ("resource_type", RESOURCE_TYPES),
        ("pattern_type", PATTERN_TYPES),
        ("operation", OPERATIONS),
        ("permission", PERMISSIONS),
    ):
        if values[name] not in codes:
            raise FormError(f"Unknown {name.replace('_', ' ')}: {values[name]!r}")
    if values["resource_type"] == "CLUSTER":
        values["resource_name"] = values["resource_name"] or CLUSTER_NAME
    if not values["resource_name"]:
        raise FormError("A resource name is needed.")
    kind, sep, who = values["principal"].partition(":")
    if not (kind and sep and who):
        raise FormError(f"Invalid principal {values['principal']!r}: expected Type:name (User:alice).")
    values["host"] = values["host"] or "*"
    operation, resource_type = values["operation"], values["resource_type"]
    if operation != "ALL" and operation not in SUPPORTED_OPERATIONS[resource_type]:
        raise FormError(
            f"A {resource_type} ACL may name only ALL, {', '.join(SUPPORTED_OPERATIONS[resource_type])}; "
            f"not {operation}."
        )
    return Acl(**values)


def _back(form: Mapping[str, object]) -> str:
    """The list as the form's page filtered it (its `filter_*` fields)."""
    query = {key: str(form.get(f"filter_{key}", "")) for key in FILTERS}
    query = {key: value for key, value in query.items() if value}
    return "/acls" + (f"?{urlencode(query)}" if query else "")


@routes.get("/acls")
async def acls(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    wanted = {key: request.query.get(key, "").strip() for key in FILTERS}
    disabled = ""
    try:
        found = await ctx.run(list_acls)
    except KafkaError as exc:
        if exc.code != ErrorCode.SECURITY_DISABLED:
            raise
        found, disabled = [], str(exc)
    shown = [
        acl
        for acl in found
        if (not wanted["type"] or acl.resource_type == wanted["type"])
        and wanted["name"].lower() in acl.resource_name.lower()
        and wanted["principal"].lower() in acl.principal.lower()
    ]
    return ctx.render(
        "acls/list.html",
        title="ACLs",
        acls=shown,
        total=len(found),
        wanted=wanted,
        disabled=disabled,
        resource_types=list(RESOURCE_TYPES),
        pattern_types=list(PATTERN_TYPES),
        operations=list(OPERATIONS),
        permissions=list(PERMISSIONS),
    )


@routes.post("/acls/create")
async def create(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    acl = acl_of(form)
    await ctx.attempt(f"Created the ACL: {describe(acl)}.", create_acl, acl)
    raise ctx.redirect(_back(form))


@routes.post("/acls/delete")
async def delete(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    acl = acl_of(form)
    await ctx.attempt(f"Deleted the ACL: {describe(acl)}.", delete_acl, acl)
    raise ctx.redirect(_back(form))
