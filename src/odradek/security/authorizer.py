"""The authorizer hook of the request path (Kafka's org.apache.kafka.server.authorizer.Authorizer).

Owns:
- `Authorizer`: `authorize(ctx, operation, resource, log_if_denied=True) -> bool`, asked with the
  request's context (`AuthorizableRequestContext`: listener, security protocol, principal, client
  host, header);
- Kafka's vocabulary for it: `AclOperation` and `ResourceType` (their wire codes), `Resource`
  (a type and a name) and `CLUSTER` (the cluster resource, named `kafka-cluster` as in Kafka);
- `AUTHORIZER_CLASS_NAMES`, the values of `authorizer.class.name` that turn ACLs on;
- `AllowEverything`, the default: every request is allowed, as a Kafka broker without
  `authorizer.class.name` allows everything.

The handlers ask it for each resource a request touches, as Kafka's KafkaApis asks (server/authz.py
holds their helpers); the ACL authorizer is security/acl_authorizer.py.

Callers: the handlers (through server/authz.py), the quota hook (the context protocol).
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from odradek.protocol.headers import RequestHeader
from odradek.security.principal import KafkaPrincipal

CLUSTER_NAME = "kafka-cluster"
# The values of authorizer.class.name that turn ACLs on (security/acl_authorizer.py): odradek's own name
# and Kafka's two, all meaning the same semantics.
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "odradek.security.AclAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Resource(NamedTuple):
    resource_type: ResourceType
    name: str


CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


class AuthorizableRequestContext(Protocol):
    """What an authorizer knows of a request (server/context.py's RequestContext)."""

    @property
    def header(self) -> RequestHeader: ...

    @property
    def listener(self) -> str: ...

    @property
    def security_protocol(self) -> str: ...

    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def client_host(self) -> str: ...


class Authorizer(Protocol):
    def authorize(
        self,
        ctx: AuthorizableRequestContext,
        operation: AclOperation,
        resource: Resource,
        log_if_denied: bool = True,
    ) -> bool:
        """Whether the request of `ctx` may perform `operation` on `resource` (a refusal is logged
        unless `log_if_denied` is false)."""
        ...

    def authorize_by_resource_type(
        self, ctx: AuthorizableRequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may perform `operation` on some resource of `resource_type`."""
        ...


class AllowEverything:
    """The default authorizer: allows every request (no authorizer configured)."""

    def authorize(
        self,
        ctx: AuthorizableRequestContext,
        operation: AclOperation,
        resource: Resource,
        log_if_denied: bool = True,
    ) -> bool:
        return True

    def authorize_by_resource_type(
        self, ctx: AuthorizableRequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True
