"""The console's SCRAM users page (`/users`): each user's SCRAM credentials (mechanism, iterations;
DescribeUserScramCredentials of every user), a form that creates a credential or changes its
password, and on each credential a password form and a delete button (AlterUserScramCredentials
upsertion and deletion). The forms are hidden in read-only mode; a refused change is flashed.

The salted password is computed here, as Kafka's admin client does: a random salt and
PBKDF2-HMAC of the password with the mechanism's hash and the iterations (SCRAM's Hi); the
password itself is never sent.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from odradek.console.reader import ClusterReader
from odradek.console.web import FormError, page, required
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, check
from odradek.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from odradek.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest

# Kafka's ScramMechanism: name -> (type id in the credential APIs, hash)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096
SALT_BYTES = 32

routes = web.RouteTableDef()


@dataclass(frozen=True, slots=True, order=True)
class Credential:
    user: str
    mechanism: str
    iterations: int


def _mechanism_name(type_id: int) -> str:
    return next((name for name, (code, _) in MECHANISMS.items() if code == type_id), f"UNKNOWN({type_id})")


def list_credentials(reader: ClusterReader) -> list[Credential]:
    """Every user's SCRAM credentials (DescribeUserScramCredentials of all users)."""
    response = reader.kafka().request(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DescribeUserScramCredentialsRequest(users=None)
    )
    check(response.error_code, response.error_message)
    found = []
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        check(result.error_code, result.error_message)
        found += [
            Credential(result.user, _mechanism_name(info.mechanism), info.iterations)
            for info in result.credential_infos
        ]
    return sorted(found)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM's Hi(password, salt, iterations): PBKDF2-HMAC with the mechanism's hash."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def upsert_credential(
    reader: ClusterReader, user: str, mechanism: str, password: str, iterations: int
) -> None:
    """Create `user`'s credential of `mechanism`, or replace it (a new password, a new salt)."""
    salt = secrets.token_bytes(SALT_BYTES)
    upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user,
        mechanism=MECHANISMS[mechanism][0],
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )
    _alter(reader, AlterUserScramCredentialsRequest(upsertions=[upsertion]))


def delete_credential(reader: ClusterReader, user: str, mechanism: str) -> None:
    deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion(
        name=user, mechanism=MECHANISMS[mechanism][0]
    )
    _alter(reader, AlterUserScramCredentialsRequest(deletions=[deletion]))


def _alter(reader: ClusterReader, request: AlterUserScramCredentialsRequest) -> None:
    response = reader.kafka().request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
    for result in response.results:
        check(result.error_code, result.error_message)


def _user_and_mechanism(form: Mapping[str, object]) -> tuple[str, str]:
    user, mechanism = str(form.get("user", "")).strip(), str(form.get("mechanism", ""))
    if not user:
        raise FormError("A user name is needed.")
    if mechanism not in MECHANISMS:
        raise FormError(f"Unknown SCRAM mechanism {mechanism!r}: {' or '.join(MECHANISMS)}.")
    return user, mechanism


def _iterations(form: Mapping[str, object]) -> int:
    text = str(form.get("iterations", "")).strip() or str(DEFAULT_ITERATIONS)
    try:
        iterations = int(text)
    except ValueError:
        raise FormError(f"Iterations must be a whole number, not {text!r}.") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise FormError(f"Iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}, not {iterations}.")
    return iterations


@routes.get("/users")
async def users(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    credentials = await ctx.run(list_credentials)
    return ctx.render(
        "users/list.html",
        title="SCRAM users",
        credentials=credentials,
        mechanisms=list(MECHANISMS),
        min_iterations=MIN_ITERATIONS,
        max_iterations=MAX_ITERATIONS,
        default_iterations=DEFAULT_ITERATIONS,
    )


@routes.post("/users/password")
async def set_password(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    user, mechanism = _user_and_mechanism(form)
    iterations = _iterations(form)
    password = required(form, "password", "A password is needed.")
    await ctx.attempt(
        f"Set the {mechanism} password of {user} ({iterations} iterations).",
        upsert_credential,
        user,
        mechanism,
        password,
        iterations,
    )
    raise ctx.redirect("/users")


@routes.post("/users/delete")
async def delete(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    user, mechanism = _user_and_mechanism(await request.post())
    await ctx.attempt(f"Deleted the {mechanism} credential of {user}.", delete_credential, user, mechanism)
    raise ctx.redirect("/users")
