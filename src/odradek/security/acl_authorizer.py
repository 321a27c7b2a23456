"""AclAuthorizer: Kafka's ACL authorizer semantics over the ACLs of an `AclStore`.

Owns the decision `authorize(ctx, operation, resource)` of a broker with `authorizer.class.name`
set to one of `AUTHORIZER_CLASS_NAMES` (odradek's own name, Kafka's ZooKeeper-mode
kafka.security.authorizer.AclAuthorizer and KRaft-mode StandardAuthorizer: all three mean these
semantics), as Kafka's AclAuthorizer decides:
1. a principal listed in `super.users` (`User:a;User:b`) is allowed everything;
2. the ACLs that apply to the resource are those of its LITERAL pattern, the LITERAL wildcard `*`
   of its type, and every PREFIXED pattern its name starts with;
3. none apply: allowed only when `allow.everyone.if.no.acl.found` is true;
4. a DENY entry matching the principal (or `User:*`), the host (or `*`) and the operation (or ALL)
   refuses, whatever allows it (deny wins);
5. otherwise an ALLOW entry matching the principal, the host and the operation, ALL, or an
   operation implying it allows: DESCRIBE is implied by READ, WRITE, DELETE and ALTER,
   DESCRIBE_CONFIGS by ALTER_CONFIGS;
6. anything else is refused.
A refusal is logged at INFO in Kafka's authorizer log form (`Principal = ... is Denied Operation =
... from host = ... on resource = ...`), except where the caller filters quietly (Metadata's topic
list: `log_if_denied=False`).

The ACLs are indexed per resource type (literal names in a dict, prefixed patterns in a list) and
rebuilt from the store whenever the store reports a change (a CreateAcls or DeleteAcls on any
broker: ZooKeeper change notifications, or the local file's writes). Decisions are cached per
(principal, host, operation, resource) until the next change, so the check a request pays is a
dictionary lookup (bench/acl_check.py).

`authorizer_for(config)` gives the broker's authorizer: `AllowEverything` without
`authorizer.class.name`, this one with a known name; an unknown class name is refused at start.

Callers: the broker (construction, `attach(store)` once the store is loaded), the handlers through
server/authz.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from odradek.protocol.api_keys import ApiKey
from odradek.security.acl_store import AclStore
from odradek.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclPermissionType,
    PatternType,
    pascal_name,
)
from odradek.security.authorizer import (
    AclOperation,
    AllowEverything,
    AuthorizableRequestContext,
    Authorizer,
    Resource,
    ResourceType,
)

log = logging.getLogger(__name__)

# The operations whose ALLOW also allows the key (Kafka's implied operations).
IMPLYING: Mapping[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    ),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}
MAX_CACHED_DECISIONS = 65536

Entries = tuple[AccessControlEntry, ...]
DecisionKey = tuple[object, str, AclOperation, Resource]


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users` (`User:a;User:b`) as principal strings."""
    return frozenset(part.strip() for part in (value or "").split(";") if part.strip())


def authorizer_for(config: Mapping[str, object]) -> Authorizer:
    """The broker's authorizer for `authorizer.class.name` (see the module docstring)."""
    class_name = str(config["authorizer.class.name"] or "").strip()
    if not class_name:
        return AllowEverything()
    return AclAuthorizer(
        parse_super_users(config["super.users"]),  # type: ignore[arg-type]
        bool(config["allow.everyone.if.no.acl.found"]),
    )


class _TypeIndex:
    """The ACLs of one resource type: literal names (the wildcard among them) and prefixed patterns."""

    __slots__ = ("literal", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, Entries] = {}
        self.prefixed: list[tuple[str, Entries]] = []

    def applying(self, name: str) -> list[Entries]:
        found = [entries for key in (name, WILDCARD_RESOURCE) if (entries := self.literal.get(key))]
        found.extend(entries for prefix, entries in self.prefixed if name.startswith(prefix))
        return found


class AclAuthorizer:
    """See the module docstring."""

    def __init__(self, super_users: Iterable[str], allow_everyone_if_no_acl_found: bool) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._decisions: dict[DecisionKey, bool] = {}
        self._store: AclStore | None = None

    def attach(self, store: AclStore) -> None:
        """Take the ACLs of `store`, now and after each change it reports."""
        self._store = store
        store.watch(self._reload)
        self._reload()

    @property
    def store(self) -> AclStore | None:
        return self._store

    def _reload(self) -> None:
        index: dict[ResourceType, _TypeIndex] = {}
        assert self._store is not None
        for pattern, entries in self._store.acls().items():
            by_type = index.setdefault(pattern.resource_type, _TypeIndex())
            if pattern.pattern_type == PatternType.PREFIXED:
                by_type.prefixed.append((pattern.name, tuple(entries)))
            else:
                by_type.literal[pattern.name] = tuple(entries)
        self._index = index
        self._decisions = {}

    def authorize(
        self,
        ctx: AuthorizableRequestContext,
        operation: AclOperation,
        resource: Resource,
        log_if_denied: bool = True,
    ) -> bool:
        key = (ctx.principal, ctx.client_host, operation, resource)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = self._decide(str(ctx.principal), ctx.client_host, operation, resource)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = allowed
        if not allowed and log_if_denied:
            log.info(
                "Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s "
                "for request = %s",
                ctx.principal,
                pascal_name(operation),
                ctx.client_host,
                pascal_name(resource.resource_type),
                resource.name,
                _api_name(ctx),
            )
        return allowed

    def authorize_by_resource_type(
        self, ctx: AuthorizableRequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of `resource_type` allows `operation` and no DENY covers it (Kafka's
        authorizeByResourceType: InitProducerId's WRITE on any topic); not cached."""
        principal = str(ctx.principal)
        if principal in self.super_users:
            return True
        by_type = self._index.get(resource_type)
        if by_type is None:
            return self.allow_everyone_if_no_acl_found
        principals, hosts = (principal, WILDCARD_PRINCIPAL), (ctx.client_host, WILDCARD_HOST)

        def has(
            entries: Entries, permission: AclPermissionType, operations: tuple[AclOperation, ...]
        ) -> bool:
            return any(
                e.permission_type == permission
                and e.operation in operations
                and e.principal in principals
                and e.host in hosts
                for e in entries
            )

        deny_ops = (operation, AclOperation.ALL)
        allow_ops = (*IMPLYING.get(operation, (operation,)), AclOperation.ALL)
        denied = {
            n for n, entries in by_type.literal.items() if has(entries, AclPermissionType.DENY, deny_ops)
        }
        denied_prefixes = [
            p for p, entries in by_type.prefixed if has(entries, AclPermissionType.DENY, deny_ops)
        ]
        if WILDCARD_RESOURCE in denied:
            return False
        candidates = [
            *(
                n
                for n, entries in by_type.literal.items()
                if n not in denied and has(entries, AclPermissionType.ALLOW, allow_ops)
            ),
            *(p for p, entries in by_type.prefixed if has(entries, AclPermissionType.ALLOW, allow_ops)),
        ]
        return any(not any(c.startswith(d) for d in denied_prefixes) for c in candidates)

    def _decide(self, principal: str, host: str, operation: AclOperation, resource: Resource) -> bool:
        if principal in self.super_users:
            return True
        by_type = self._index.get(resource.resource_type)
        applying = by_type.applying(resource.name) if by_type is not None else []
        if not applying:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        entries = [e for group in applying for e in group if e.principal in principals and e.host in hosts]
        if any(
            e.permission_type == AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
            for e in entries
        ):
            return False
        allowing = (*IMPLYING.get(operation, (operation,)), AclOperation.ALL)
        return any(e.permission_type == AclPermissionType.ALLOW and e.operation in allowing for e in entries)


def _api_name(ctx: AuthorizableRequestContext) -> str:
    try:
        return ApiKey(ctx.header.api_key).name
    except ValueError:
        return str(ctx.header.api_key)
