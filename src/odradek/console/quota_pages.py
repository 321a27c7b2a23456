"""The console's client quotas page (`/quotas`): one row per quota entity (user, client id;
`<default>` for a default) with its four quotas (DescribeClientQuotas); a form that sets one quota
(or removes it, with an empty value) of a user, a client id, a user's client id, or their defaults,
and a remove button beside each quota set (AlterClientQuotas). The forms are hidden in read-only
mode; a refused change is flashed.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from aiohttp import web

from odradek.console.reader import ClusterReader
from odradek.console.web import FormError, page
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import check
from odradek.protocol.messages.alter_client_quotas import AlterClientQuotasRequest

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
USER, CLIENT_ID = "user", "client-id"
Entity = tuple[tuple[str, str | None], ...]  # (entity type, name or None for the default), user first
routes = web.RouteTableDef()


def alter_quota(reader: ClusterReader, entity: Entity, key: str, value: float | None) -> None:
    """Set `key` of `entity` to `value`, or remove it (None)."""
    op = AlterClientQuotasRequest.OpData(key=key, value=0.0 if value is None else value, remove=value is None)
    request = AlterClientQuotasRequest(
        entries=[
            AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntityData(kind, name) for kind, name in entity], ops=[op]
            )
        ]
    )
    response = reader.kafka().request(ApiKey.ALTER_CLIENT_QUOTAS, request)
    for entry in response.entries:
        check(entry.error_code, entry.error_message)


def entity_of(form: Mapping[str, object]) -> Entity:
    """The entity a form names: a user and / or a client id, each a name or the default."""
    found: list[tuple[str, str | None]] = []
    for kind, field in ((USER, "user"), (CLIENT_ID, "client_id")):
        name = str(form.get(field, "")).strip()
        default = str(form.get(f"{field}_default", "")) == "on"
        if default and name:
            raise FormError(f"Give a {kind} or its default, not both.")
        if default or name:
            found.append((kind, None if default else name))
    if not found:
        raise FormError("Name a user, a client id, or a default.")
    return tuple(found)


def describe(entity: Entity) -> str:
    return " and ".join(f"{kind} {'<default>' if name is None else name}" for kind, name in entity)


def _value(form: Mapping[str, object]) -> float | None:
    text = str(form.get("value", "")).strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise FormError(f"A quota is a number, not {text!r}.") from None
    if not math.isfinite(value) or value <= 0:
        raise FormError(f"A quota must be more than 0, not {text}.")
    return value


def _shown(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def _key(form: Mapping[str, object]) -> str:
    key = str(form.get("key", ""))
    if key not in QUOTA_KEYS:
        raise FormError(f"Unknown quota {key!r}: {', '.join(QUOTA_KEYS)}.")
    return key


@routes.get("/quotas")
async def quotas(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    found = await ctx.run(ClusterReader.quotas)
    return ctx.render("quotas/list.html", title="Client quotas", quotas=found, keys=QUOTA_KEYS)


@routes.post("/quotas/set")
async def set_quota(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    entity, key, value = entity_of(form), _key(form), _value(form)
    done = (
        f"Removed {key} of {describe(entity)}."
        if value is None
        else f"Set {key} of {describe(entity)} to {_shown(value)}."
    )
    await ctx.attempt(done, alter_quota, entity, key, value)
    raise ctx.redirect("/quotas")


@routes.post("/quotas/remove")
async def remove_quota(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    entity, key = entity_of(form), _key(form)
    await ctx.attempt(f"Removed {key} of {describe(entity)}.", alter_quota, entity, key, None)
    raise ctx.redirect("/quotas")
