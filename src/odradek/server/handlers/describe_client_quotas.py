"""DescribeClientQuotas handler (KIP-546).

API: v0-v1.

Behaviour: the client entities with quotas that match every filter component: match type 0 (exact:
the entity has that type with that name), 1 (default: that type's `<default>`) or 2 (any: that type
with any name); with `strict` the entity has no other type. No component matches every entity.
Each entry lists the entity's components and its quota keys (producer_byte_rate,
consumer_byte_rate, request_percentage, controller_mutation_rate); other keys of the entity (SCRAM
credentials) are not shown, and an entity with none of them is not listed. Read from this broker's
copy of the metadata store (kept current by ZooKeeper's change notifications).

Errors (the whole response, entries null): INVALID_REQUEST for a type named twice, an exact match
without a name, a default or any match with one, an unknown match type, or ip combined with user or
client-id; UNSUPPORTED_VERSION for an entity type other than user, client-id and ip (as Kafka).
An ip filter alone matches nothing: odradek stores no ip quotas.

Authorization (Kafka's): DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the whole
request.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.controller.store import CLIENT_ID, USER, ClientEntity, client_entity_of
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.client_quotas import IP, quota_values
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
_ANY = object()  # a component matching any name

Component = DescribeClientQuotasRequest.ComponentData
Entry = DescribeClientQuotasResponse.EntryData


async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    require_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
    try:
        wanted = _filter(request.components)
    except KafkaError as exc:  # a bad filter: the error with its reason, as Kafka answers
        return DescribeClientQuotasResponse(error_code=exc.code, error_message=exc.message, entries=None)
    entries = []
    for (entity_type, name), configs in sorted(ctx.broker.store.client_entities().items()):
        values = quota_values(configs)
        entity = client_entity_of(entity_type, name)
        if values and wanted is not None and _matches(entity, wanted, request.strict):
            entries.append(_entry(entity, values))
    return DescribeClientQuotasResponse(entries=entries)


def _filter(components: Iterable[Component]) -> dict[str, object] | None:
    """Entity type -> the name wanted (None: the default, _ANY: any); None when nothing can match."""
    wanted: dict[str, object] = {}
    for c in components:
        if c.entity_type in wanted:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more than once"
            )
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        wanted[c.entity_type] = _wanted_name(c)
    if IP in wanted:
        if len(wanted) > 1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be used with "
                "user or clientId filter component.",
            )
        return None
    return wanted


def _wanted_name(c: Component) -> object:
    if c.match_type == MATCH_EXACT:
        if c.match is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
            )
        return c.match
    if c.match_type in (MATCH_DEFAULT, MATCH_ANY):
        if c.match is not None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Request specified a match type without a match string, but also specified a match string.",
            )
        return None if c.match_type == MATCH_DEFAULT else _ANY
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")


def _matches(entity: ClientEntity, wanted: dict[str, object], strict: bool) -> bool:
    names = dict(entity)
    if strict and names.keys() != wanted.keys():
        return False
    return all(kind in names and (name is _ANY or names[kind] == name) for kind, name in wanted.items())


def _entry(entity: ClientEntity, values: dict[str, float]) -> Entry:
    return Entry(
        entity=[DescribeClientQuotasResponse.EntityData(kind, name) for kind, name in entity],
        values=[DescribeClientQuotasResponse.ValueData(key, value) for key, value in values.items()],
    )


def error_response(
    request: DescribeClientQuotasRequest, version: int, code: int
) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(error_code=code, entries=None)
