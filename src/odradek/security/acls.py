"""ACLs as Kafka models them: resource patterns, access control entries, bindings and filters.

Owns Kafka's vocabulary of org.apache.kafka.common.acl / .resource: `PatternType` (LITERAL,
PREFIXED; ANY and MATCH in filters), `AclPermissionType` (ALLOW, DENY), `ResourcePattern` (a
resource type, a name and a pattern type), `AccessControlEntry` (principal, host, operation,
permission), `AclBinding` (a pattern with an entry), `AclBindingFilter` (what DescribeAcls and
DeleteAcls match) and `validate_binding` (what CreateAcls refuses); the names Kafka gives these
values in ZooKeeper JSON and in kafka-acls.sh (`Topic`, `Read`, `Allow`...) with their parsers.

Matching, as Kafka's filters match:
- a pattern filter with resource type ANY, a null name or pattern type ANY matches any of that part;
  pattern type MATCH matches what would apply to a resource of that name: the LITERAL pattern of the
  name, the LITERAL wildcard `*` and every PREFIXED pattern the name starts with;
- an entry filter with a null principal or host, operation ANY or permission ANY matches any.

Callers: the authorizer (authorizer.py), the ACL stores (acl_store.py), the ACL handlers and
`odradek acls`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType

E = TypeVar("E", bound=enum.Enum)

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"

_OP = AclOperation
# Kafka's AclEntry.supportedOperations: what each resource type's ACLs may name (`odradek acls`
# checks it) and what the authorized-operations fields report on.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _OP.READ,
        _OP.WRITE,
        _OP.CREATE,
        _OP.DESCRIBE,
        _OP.DELETE,
        _OP.ALTER,
        _OP.DESCRIBE_CONFIGS,
        _OP.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_OP.READ, _OP.DESCRIBE, _OP.DELETE),
    ResourceType.CLUSTER: (
        _OP.CREATE,
        _OP.CLUSTER_ACTION,
        _OP.DESCRIBE_CONFIGS,
        _OP.ALTER_CONFIGS,
        _OP.IDEMPOTENT_WRITE,
        _OP.ALTER,
        _OP.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_OP.DESCRIBE, _OP.WRITE),
    ResourceType.DELEGATION_TOKEN: (_OP.DESCRIBE,),
    ResourceType.USER: (_OP.CREATE_TOKENS, _OP.DESCRIBE_TOKENS),
}


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self._matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH and self.name is not None:
            return _applies_to(pattern, self.name)
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def _matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def unknown_part(self) -> str | None:
        """The part of the filter holding an UNKNOWN value (Kafka refuses such a filter), if any."""
        for name, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission type", self.permission_type),
        ):
            if value == 0:
                return name
        return None


def _applies_to(pattern: ResourcePattern, name: str) -> bool:
    """Whether `pattern` applies to the resource named `name` (the MATCH filter)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return pattern.name in (name, WILDCARD_RESOURCE)
    return pattern.pattern_type == PatternType.PREFIXED and name.startswith(pattern.name)


def validate_binding(binding: AclBinding) -> None:
    """Raise KafkaError (INVALID_REQUEST) for a binding CreateAcls refuses, as Kafka's authorizer does."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid resource type")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid pattern type {pattern.pattern_type.name}")
    if not pattern.name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Resource name must not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid operation")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid permission type")
    principal_type, sep, principal_name = entry.principal.partition(":")
    if not sep or not principal_type or not principal_name:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Invalid principal {entry.principal!r}: expected Type:name"
        )


# -- Kafka's names (ZooKeeper JSON, kafka-acls.sh) ------------------------------------------------


def pascal_name(value: enum.Enum) -> str:
    """Kafka's SecurityUtils names: TRANSACTIONAL_ID -> TransactionalId, DESCRIBE_CONFIGS ->
    DescribeConfigs, ALLOW -> Allow."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_enum(kind: type[E], text: str) -> E:
    """The member named `text` in either Kafka spelling (`TRANSACTIONAL_ID`, `TransactionalId`,
    any case); ValueError otherwise."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in kind:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {kind.__name__} {text!r}")


def entry_to_json(entry: AccessControlEntry) -> dict[str, str]:
    """Kafka's AclEntry JSON:
    `{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}`."""
    return {
        "principal": entry.principal,
        "permissionType": pascal_name(entry.permission_type),
        "operation": pascal_name(entry.operation),
        "host": entry.host,
    }


def entry_from_json(value: dict[str, str]) -> AccessControlEntry:
    return AccessControlEntry(
        value["principal"],
        value["host"],
        parse_enum(AclOperation, value["operation"]),
        parse_enum(AclPermissionType, value["permissionType"]),
    )
