"""RequestContext: what a handler knows about the request it serves besides its body.

Owns the `RequestContext` value handed to every `handle(ctx, request)`: the parsed request header
(api key, api version, correlation id, client id), the broker (config, metadata, log manager,
replica manager, purgatory, cluster id, advertised endpoints), the client's host and the name of the
listener its connection arrived on (answers name that listener's endpoints).

Callers: the dispatcher builds one per request; handlers read it and never keep it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from odradek.server.broker import Broker


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str
    listener: str

    @property
    def api_version(self) -> int:
        return self.header.api_version
