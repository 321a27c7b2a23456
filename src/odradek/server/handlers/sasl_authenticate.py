"""SaslAuthenticate handler: the request when it reaches the request path, i.e. not as part of a SASL
exchange.

API: v0-v2.

Behaviour, as Kafka's KafkaApis: the exchanges of a SASL listener are taken by the connection's
gate (server/sasl_authenticator.py); a SaslAuthenticate that reaches this handler (a PLAINTEXT
listener, or a client already authenticated) is answered ILLEGAL_SASL_STATE with Kafka's message.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from odradek.server.context import RequestContext

API_KEY = ApiKey.SASL_AUTHENTICATE
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
    )


def error_response(request: SaslAuthenticateRequest, version: int, code: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code)
