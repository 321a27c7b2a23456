"""ApiVersions handler.

API: v0-v5.

Behaviour: lists every API in the handler registry of the broker's mode (`registry_for`: the
ZooKeeper-only controller APIs only with zookeeper.connect set) with the version range its module
declares, so the advertised set is exactly what the dispatcher routes. A v3+ request whose client
software name or version is not Kafka's `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` gets
INVALID_REQUEST with an empty list, as Kafka 3.9 answers (tests/differential). v5 (Kafka 4's
KIP-1242) lets a client name the cluster and node it means to reach: both given and either one not
this broker's (its cluster id, its broker id) answers REBOOTSTRAP_REQUIRED with an empty list, only
one of them given INVALID_REQUEST with an empty list, neither (null, -1) the list; as Kafka 4.4
answers. A version outside v0-v5 never reaches this module: the dispatcher answers it with
UNSUPPORTED_VERSION in a v0 body (the mode's list too).

The advertised versions are the union of Kafka 3.9's and Kafka 4's where odradek serves them: the
old versions Kafka 4 removed (KIP-896, e.g. CreateTopics v0-v1, OffsetCommit v0-v1) stay served for
old clients, a deliberate deviation from Kafka 4.

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
MAX_VERSION = 5

NO_NODE_ID = -1

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
    error = ErrorCode.NONE if valid else ErrorCode.INVALID_REQUEST
    if valid and ctx.api_version >= 5:
        error = _target_error(ctx, request)
    return ApiVersionsResponse(
        error_code=error,
        api_keys=supported_versions(registry_for(ctx.broker.config)) if error == ErrorCode.NONE else [],
    )


def _target_error(ctx: RequestContext, request: ApiVersionsRequest) -> ErrorCode:
    """v5: the cluster and node the client means to reach, when it names them, must be this broker."""
    names_cluster, names_node = request.cluster_id is not None, request.node_id != NO_NODE_ID
    if not names_cluster and not names_node:
        return ErrorCode.NONE
    if names_cluster != names_node:
        return ErrorCode.INVALID_REQUEST
    if request.cluster_id != ctx.broker.cluster_id or request.node_id != ctx.broker.broker_id:
        return ErrorCode.REBOOTSTRAP_REQUIRED
    return ErrorCode.NONE


def error_response(request: ApiVersionsRequest, version: int, code: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=supported_versions())
