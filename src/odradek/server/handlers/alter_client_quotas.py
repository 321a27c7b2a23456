"""AlterClientQuotas handler (KIP-546).

API: v0-v1.

Behaviour: each entry names an entity (`user` and/or `client-id`, a null name for the default,
Kafka's `<default>`) and ops that set (`value`) or remove (`remove`) quota keys:
producer_byte_rate, consumer_byte_rate (whole numbers), request_percentage,
controller_mutation_rate. Each entry is answered on its own: INVALID_REQUEST for a repeated or
unknown entity type, an empty name, an unknown key, a key named twice, a fractional byte rate or a
value not above 0. The valid entries are written through the metadata store's client entity configs
(ZooKeeper: `/config/users/<u>`, `/config/users/<u>/clients/<c>`, `/config/clients/<c>` and a
`/config/changes` notification, so every broker applies them at once; a single node: the local
metadata file); other keys of the entity (SCRAM credentials) are kept. validate_only checks and
writes nothing. A write that fails answers that entry with its error.

Deliberate deviations: ip entities (connection_creation_rate) answer INVALID_REQUEST (odradek has
only the broker-wide max.connection.creation.rate); a value of 0 or below and an empty name answer
INVALID_REQUEST.

Authorization (Kafka's): ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every entry.
"""

from __future__ import annotations

import logging

from odradek.controller.store import client_entity_path
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_cluster
from odradek.server.client_quotas import quota_entity, quota_value
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

log = logging.getLogger(__name__)

Entry = AlterClientQuotasResponse.EntryData


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    require_cluster(ctx, AclOperation.ALTER_CONFIGS)
    return AlterClientQuotasResponse(
        entries=[await _alter(ctx, entry, request.validate_only) for entry in request.entries]
    )


async def _alter(
    ctx: RequestContext, entry: AlterClientQuotasRequest.EntryData, validate_only: bool
) -> Entry:
    answer = Entry(entity=_echo(entry))
    try:
        entity = quota_entity((e.entity_type, e.entity_name) for e in entry.entity)
        to_set, to_delete = _ops(entry.ops)
        if not validate_only:
            await ctx.broker.store.alter_client_entity_configs(*client_entity_path(entity), to_set, to_delete)
            log.info("Client quotas of %s altered: set %s, removed %s", entity, to_set, sorted(to_delete))
    except KafkaError as exc:
        answer.error_code, answer.error_message = exc.code, exc.message
    return answer


def _ops(ops: list[AlterClientQuotasRequest.OpData]) -> tuple[dict[str, str], set[str]]:
    to_set: dict[str, str] = {}
    to_delete: set[str] = set()
    for op in ops:
        if op.key in to_set or op.key in to_delete:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key}")
        if op.remove:
            quota_value(op.key, 1.0)  # the key must be a quota key
            to_delete.add(op.key)
        else:
            to_set[op.key] = quota_value(op.key, op.value)
    return to_set, to_delete


def _echo(entry: AlterClientQuotasRequest.EntryData) -> list[AlterClientQuotasResponse.EntityData]:
    return [AlterClientQuotasResponse.EntityData(e.entity_type, e.entity_name) for e in entry.entity]


def error_response(request: AlterClientQuotasRequest, version: int, code: int) -> AlterClientQuotasResponse:
    message = "Cluster authorization failed." if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else None
    # the refusal's message on each entry, as Kafka's
    entries = [Entry(error_code=code, error_message=message, entity=_echo(e)) for e in request.entries]
    return AlterClientQuotasResponse(entries=entries)
