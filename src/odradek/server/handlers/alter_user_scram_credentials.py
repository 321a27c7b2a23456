"""AlterUserScramCredentials handler (KIP-554).

API: v0.

Behaviour, as Kafka (ZooKeeper mode's checks, one result per user named): an upsertion carries the
salt and salted password the client derived; the broker stores Kafka's form (salt, stored key,
server key, iterations) in the user's entity configs, keeping its other keys (quotas). Refused per
user, with Kafka's messages, nothing of that user altered: an empty user name
(UNACCEPTABLE_CREDENTIAL), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), one mechanism altered
twice (DUPLICATE_RESOURCE), iterations outside 4096..16384 or an empty salt or salted password
(UNACCEPTABLE_CREDENTIAL), the deletion of a credential that does not exist (RESOURCE_NOT_FOUND).
Every broker learns of the change through the store (ZooKeeper's /config/changes notification).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from odradek.security.sasl import credentials
from odradek.security.sasl.scram import (
    ScramCredential,
    ScramMechanism,
    check_iterations,
    credential_from_salted,
)
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


async def handle(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    results = []
    for user in users:
        deletions = [d for d in request.deletions if d.name == user]
        upsertions = [u for u in request.upsertions if u.name == user]
        try:
            await _alter(ctx, user, deletions, upsertions)
        except KafkaError as exc:
            results.append(Result(user, exc.code, exc.message))
        else:
            results.append(Result(user, ErrorCode.NONE, None))
    return AlterUserScramCredentialsResponse(results=results)


async def _alter(
    ctx: RequestContext, user: str, deletions: list[Deletion], upsertions: list[Upsertion]
) -> None:
    if not user:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    _check_distinct(d.mechanism for d in [*deletions, *upsertions])
    deletes = [_mechanism(d.mechanism) for d in deletions]
    upserts = {_mechanism(u.mechanism): _credential(u) for u in upsertions}
    existing = credentials.described(ctx.broker.store, user)
    for mechanism in deletes:
        if mechanism not in existing:
            raise KafkaError(
                ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            )
    await credentials.alter(ctx.broker.store, user, upserts, deletes)


def _check_distinct(mechanisms: Iterable[int]) -> None:
    if any(count > 1 for count in Counter(mechanisms).values()):
        raise KafkaError(
            ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        )


def _mechanism(type_id: int) -> ScramMechanism:
    mechanism = ScramMechanism.of_type(type_id)
    if mechanism is None:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return mechanism


def _credential(upsertion: Upsertion) -> ScramCredential:
    mechanism = _mechanism(upsertion.mechanism)
    complaint = check_iterations(upsertion.iterations)
    if complaint is not None:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, complaint)
    if not upsertion.salt or not upsertion.salted_password:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    return credential_from_salted(
        mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations
    )


def error_response(
    request: AlterUserScramCredentialsRequest, version: int, code: int
) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(results=[Result(user, code, None) for user in users])
