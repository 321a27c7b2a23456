"""ApiVersions handler.

API: v0-v4.

Behaviour: lists every API in the handler registry of the broker's mode (`registry_for`: the
ZooKeeper-only controller APIs only with zookeeper.connect set) with the version range its module
declares, so the advertised set is exactly what the dispatcher routes. A v3+ request whose client
software name or version is not Kafka's `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` gets
INVALID_REQUEST with an empty list, as Kafka 3.9 answers (tests/differential). A version outside
v0-v4 never reaches this module: the dispatcher answers it with UNSUPPORTED_VERSION in a v0 body
(the mode's list too).

Deliberate deviations: no supported or finalized features (a ZooKeeper-mode broker has none the
clients need), finalized features epoch -1; never throttled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from odradek.server.context import RequestContext
from odradek.server.handlers import registry, registry_for

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4

_SOFTWARE_FIELD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_versions(
    handlers: Mapping[int, ModuleType] | None = None,
) -> list[ApiVersionsResponse.ApiVersion]:
    """One entry per API of `handlers` (default: the single-node registry), by API key."""
    return [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=m.MIN_VERSION, max_version=m.MAX_VERSION)
        for key, m in sorted((registry() if handlers is None else handlers).items())
    ]


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    valid = ctx.api_version < 3 or (
        _SOFTWARE_FIELD.fullmatch(request.client_software_name) is not None
        and _SOFTWARE_FIELD.fullmatch(request.client_software_version) is not None
    )
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE if valid else ErrorCode.INVALID_REQUEST,
        api_keys=supported_versions(registry_for(ctx.broker.config)) if valid else [],
    )


def error_response(request: ApiVersionsRequest, version: int, code: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=supported_versions())
