"""RequestContext: what a handler knows about the request it serves besides its body.

Owns the `RequestContext` value handed to every `handle(ctx, request)`: the parsed request header
(api key, api version, correlation id, client id), the broker (config, metadata, log manager,
replica manager, purgatory, cluster id, advertised endpoints), and the connection the request came
on, as the network layer set it at accept: the client's host, the name of the listener it arrived
on (answers name that listener's endpoints), that listener's security protocol (PLAINTEXT) and the
connection's principal (`KafkaPrincipal`, User:ANONYMOUS on PLAINTEXT). The authorizer and quota
hooks of the request path see it too (security/authorizer.py, server/client_quotas.py).

Callers: the dispatcher builds one per request; handlers read it and never keep it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.protocol.headers import RequestHeader
from odradek.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from odradek.server.kafka_server import KafkaServer


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: KafkaServer
    client_host: str
    listener: str
    security_protocol: str
    principal: KafkaPrincipal

    @property
    def api_version(self) -> int:
        return self.header.api_version
