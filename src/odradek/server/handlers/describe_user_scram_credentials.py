"""DescribeUserScramCredentials handler (KIP-554).

API: v0.

Behaviour, as Kafka: the users asked for (all users with a SCRAM credential when the list is null
or empty), each with its mechanisms and iterations (never the salt or keys). A user asked for twice
is answered DUPLICATE_RESOURCE, a user with no credential RESOURCE_NOT_FOUND, each with Kafka's
message. Credentials are read from the metadata store (security/sasl/credentials.py).
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from odradek.security.sasl import credentials
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeUserScramCredentialsResponse.CredentialInfo


async def handle(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    store = ctx.broker.store
    asked = [user.name for user in request.users or []]
    if not asked:
        return DescribeUserScramCredentialsResponse(
            results=[
                _described(user, credentials.described(store, user))
                for user in credentials.users_with_credentials(store)
            ]
        )
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        if counts[user] > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append(Result(user, ErrorCode.DUPLICATE_RESOURCE, message))
            continue
        found = credentials.described(store, user)
        if not found:
            message = f"Attempt to describe a user credential that does not exist: {user}"
            results.append(Result(user, ErrorCode.RESOURCE_NOT_FOUND, message))
            continue
        results.append(_described(user, found))
    return DescribeUserScramCredentialsResponse(results=results)


def _described(user: str, found: dict) -> Result:
    infos = [CredentialInfo(mechanism.type_id, iterations) for mechanism, iterations in found.items()]
    return Result(user, ErrorCode.NONE, None, infos)


def error_response(
    request: DescribeUserScramCredentialsRequest, version: int, code: int
) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(error_code=code)
