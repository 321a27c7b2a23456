"""SaslHandshake handler: the request when it reaches the request path, i.e. not as part of a SASL
exchange.

API: v0-v1.

Behaviour, as Kafka's KafkaApis: on a SASL listener the connection's gate
(server/sasl_authenticator.py) takes the handshakes that begin an authentication or a
re-authentication; one that reaches this handler (a PLAINTEXT listener, or an authenticated client
that cannot re-authenticate) is answered ILLEGAL_SASL_STATE with the mechanisms of no listener.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from odradek.server.context import RequestContext

API_KEY = ApiKey.SASL_HANDSHAKE
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return error_response(request, ctx.api_version, ErrorCode.ILLEGAL_SASL_STATE)


def error_response(request: SaslHandshakeRequest, version: int, code: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code)
