"""SASL mechanisms, server and client side: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.

A server mechanism (`SaslServer`) takes the client's tokens in turn (`evaluate`), answers each with
its challenge, and is `complete` once the client has proved who it is; `authorization_id` is then
the authenticated user and `credential_expiry_ms` (OAUTHBEARER) the wall-clock end of its token.
Failures follow Kafka's two kinds: `SaslAuthenticationError` carries a message the client is shown
as is (Kafka's SaslAuthenticationException); `SaslError` is shown only as Kafka's generic "invalid
credentials" message (its detail is logged, never sent: it could tell whether a user exists).

- PLAIN (RFC 4616, Kafka's PlainSaslServer): users and passwords are the `user_<name>="<password>"`
  options of the listener's PlainLoginModule JAAS config, compared in constant time.
- SCRAM-SHA-256/512 (RFC 5802, Kafka's ScramSaslServer): the credential of the user named in the
  client-first message is looked up (the store: ZooKeeper /config/users or the local metadata);
  channel binding is not supported (gs2 header `n`); as Kafka 3.9 (after CVE-2024-56128), the
  client-final nonce must end with the combined nonce (librdkafka before 2.6.1 repeats the client
  nonce in front); Kafka's delegation-token extension
  (`tokenauth=true`) is refused, since odradek has no delegation tokens.
- OAUTHBEARER (RFC 7628) with Kafka's default unsecured JWT validation
  (OAuthBearerUnsecuredValidatorCallbackHandler): an unsigned JWS (`alg` none, empty signature)
  whose principal claim (`unsecuredValidatorPrincipalClaimName`, default `sub`) names the user, with
  a numeric `exp` not past (within `unsecuredValidatorAllowableClockSkewMs`), an `iat` not in the
  future, and every scope of `unsecuredValidatorRequiredScope` in its scope claim
  (`unsecuredValidatorScopeClaimName`, default `scope`). An invalid token is answered with Kafka's
  JSON error challenge (`{"status":"invalid_token"}`); the client's `%x01` reply then fails the
  exchange with that JSON as the message.

Client side, for the broker's own connections (client.py): PLAIN, SCRAM and OAUTHBEARER with an
unsecured token (Kafka's OAuthBearerUnsecuredLoginCallbackHandler: `unsecuredLoginStringClaim_sub`,
`unsecuredLoginLifetimeSeconds`).

Callers: server/sasl_authenticator.py (servers, through server/sasl_listener.py's factories),
client.py (clients).
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from odradek.security.sasl import scram
from odradek.security.sasl.scram import ScramCredential, ScramMechanism

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = tuple(m.mechanism_name for m in ScramMechanism)
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
_KVSEP = "\x01"


class SaslError(Exception):
    """A failed exchange whose detail is logged but not sent to the client."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message is sent to the client (SASL_AUTHENTICATION_FAILED)."""


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str
    credential_expiry_ms: int | None

    def evaluate(self, token: bytes) -> bytes: ...


ScramCredentials = Callable[[ScramMechanism, str], ScramCredential | None]


# -- PLAIN --------------------------------------------------------------------------------------------


class PlainServer:
    mechanism = PLAIN
    credential_expiry_ms = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00")
        if len(parts) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compare even for an unknown user, so that the time taken does not tell whether it exists
        matches = hmac.compare_digest((expected or "").encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id, self.complete = user, True
        return b""


def plain_client_token(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()


# -- SCRAM --------------------------------------------------------------------------------------------


class ScramServer:
    credential_expiry_ms = None

    def __init__(self, mechanism: ScramMechanism, credentials: ScramCredentials) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        self.complete = False
        self.authorization_id = ""
        self._step = self._client_first
        self._credential: ScramCredential | None = None
        self._gs2_header = self._client_first_bare = self._server_first = self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._step(token.decode())
        except (ValueError, KeyError) as exc:
            raise SaslError(f"Invalid {self.mechanism} message: {exc}") from None

    def _client_first(self, message: str) -> bytes:
        flag, authzid, bare = message.split(",", 2)
        if flag != "n":
            raise SaslError(f"{self.mechanism}: channel binding ({flag!r}) is not supported")
        attrs = scram.attributes(bare)
        user = scram.username(attrs["n"])
        nonce = attrs["r"]
        if "tokenauth=true" in bare.split(",")[2:]:
            raise SaslError("delegation tokens (tokenauth) are not supported")
        if authzid and scram.username(authzid.removeprefix("a=")) != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        credential = self._credentials(self._scram, user)
        if credential is None:
            raise SaslError(
                f"Authentication failed: Invalid user credentials (no {self.mechanism} credential for {user})"
            )
        if credential.iterations < scram.MIN_ITERATIONS:
            raise SaslError(
                f"Iterations {credential.iterations} is less than the minimum {scram.MIN_ITERATIONS}"
            )
        self._credential, self.authorization_id = credential, user
        self._gs2_header, self._client_first_bare = f"{flag},{authzid},", bare
        self._nonce = nonce + secrets.token_urlsafe(24)
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._step = self._client_final
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        without_proof, _, proof_attr = message.rpartition(",p=")
        attrs = scram.attributes(without_proof)
        if base64.b64decode(attrs["c"]) != self._gs2_header.encode():
            raise SaslError("Invalid channel binding")
        # Kafka 3.9 accepts a final nonce that only ends with the combined nonce: librdkafka before
        # 2.6.1 sends the client nonce twice (Kafka 4 is strict)
        if not attrs["r"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self._scram.hmac(credential.stored_key, auth_message)
        client_key = scram.xor(base64.b64decode(proof_attr), signature)
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise SaslError(f"Authentication failed: Invalid client credentials for {self.authorization_id}")
        self.complete = True
        self._step = self._done
        server_signature = self._scram.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)

    def _done(self, message: str) -> bytes:
        raise SaslError("Unexpected SCRAM message after the exchange completed")


class ScramClient:
    """The client side of a SCRAM exchange: `first()`, then `evaluate()` of each server message
    (None once the server's signature is verified)."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password
        self._bare = f"n={scram.sasl_name(user)},r={secrets.token_urlsafe(24)}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        text = challenge.decode()
        if self._server_signature:
            if scram.attributes(text).get("v", "") != base64.b64encode(self._server_signature).decode():
                raise SaslError(f"{self.mechanism}: the server's signature does not match")
            return None
        attrs = scram.attributes(text)
        if not attrs["r"].startswith(self._bare.split(",r=", 1)[1]):
            raise SaslError(f"{self.mechanism}: the server nonce does not extend the client nonce")
        salted = self._scram.salted_password(self._password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = self._scram.client_key(salted)
        proof = scram.xor(client_key, self._scram.hmac(self._scram.hash(client_key), auth_message))
        self._server_signature = self._scram.hmac(self._scram.server_key(salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


# -- OAUTHBEARER ----------------------------------------------------------------------------------------


class OAuthBearerServer:
    """OAUTHBEARER with Kafka's unsecured JWT validation; `options` are the JAAS options."""

    mechanism = OAUTHBEARER

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int] | None = None) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = _scopes(options.get("unsecuredValidatorRequiredScope", ""))
        self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        if text == _KVSEP and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        authzid, bearer = _client_initial_response(text)
        try:
            principal, expiry_ms = self._validate(bearer)
        except _InvalidToken as exc:
            self._error = json.dumps({"status": exc.status, **exc.extra}, separators=(",", ":"))
            return self._error.encode()
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                f"different from the token's principal name ({principal})"
            )
        self.authorization_id, self.credential_expiry_ms, self.complete = principal, expiry_ms, True
        return b""

    def _validate(self, token: str) -> tuple[str, int]:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise _InvalidToken(
                "invalid_token", reason="not an unsecured JWS (header.claims. with no signature)"
            )
        header, claims = _json_part(parts[0]), _json_part(parts[1])
        if header.get("alg") != "none":
            raise _InvalidToken("invalid_token", reason="the unsecured JWS header's alg is not none")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise _InvalidToken("invalid_token", reason=f"no principal claim {self._principal_claim}")
        expiry, issued = claims.get("exp"), claims.get("iat")
        if not _is_number(expiry) or (issued is not None and not _is_number(issued)):
            raise _InvalidToken("invalid_token", reason="exp missing, or exp or iat not a number")
        now, expiry_ms = self._now_ms(), int(expiry * 1000)
        if now > expiry_ms + self._skew_ms:
            raise _InvalidToken("invalid_token", reason=f"expired at {expiry_ms} ms (now {now} ms)")
        if issued is not None and int(issued * 1000) > now + self._skew_ms:
            raise _InvalidToken("invalid_token", reason="the issued-at time is in the future")
        missing = self._required_scope - _scopes(claims.get(self._scope_claim, ""))
        if missing:
            raise _InvalidToken("insufficient_scope", scope=" ".join(sorted(self._required_scope)))
        return principal, expiry_ms


class _InvalidToken(Exception):
    def __init__(self, status: str, reason: str = "", **extra: str) -> None:
        super().__init__(reason or status)
        self.status, self.extra = status, extra


def _client_initial_response(text: str) -> tuple[str, str]:
    """(authorization id, bearer token) of an OAUTHBEARER client-first message (RFC 7628)."""
    try:
        flag, authzid, rest = text.split(",", 2)
    except ValueError:
        raise SaslError("Invalid OAUTHBEARER client first message") from None
    if flag not in ("n", "y") or not rest.startswith(_KVSEP) or not rest.endswith(_KVSEP * 2):
        raise SaslError("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.partition("=")[::2] for kv in rest[1:-2].split(_KVSEP))
    scheme, _, bearer = pairs.get("auth", "").partition(" ")
    if scheme.lower() != "bearer" or not bearer.strip():
        raise SaslError("Invalid OAUTHBEARER client first message: no auth=Bearer <token>")
    return authzid.removeprefix("a="), bearer.strip()


def _json_part(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except ValueError:
        raise _InvalidToken("invalid_token", reason="a JWS part is not base64url JSON") from None
    if not isinstance(value, dict):
        raise _InvalidToken("invalid_token", reason="a JWS part is not a JSON object")
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scopes(value: object) -> set[str]:
    if isinstance(value, list):
        return {str(v) for v in value}
    return {s for s in str(value).replace(",", " ").split() if s}


def unsecured_token(options: Mapping[str, str], now_s: float | None = None) -> str:
    """Kafka's OAuthBearerUnsecuredLoginCallbackHandler token: an unsigned JWS with `sub` from
    `unsecuredLoginStringClaim_sub`, lasting `unsecuredLoginLifetimeSeconds` (default 3600)."""
    now_s = time.time() if now_s is None else now_s
    claims: dict[str, Any] = {
        "iat": now_s,
        "exp": now_s + int(options.get("unsecuredLoginLifetimeSeconds", "3600")),
    }
    claims.update(
        {
            k.removeprefix("unsecuredLoginStringClaim_"): v
            for k, v in options.items()
            if k.startswith("unsecuredLoginStringClaim_")
        }
    )
    return f"{_b64url_json({'alg': 'none'})}.{_b64url_json(claims)}."


def _b64url_json(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def oauthbearer_client_token(token: str) -> bytes:
    return f"n,,{_KVSEP}auth=Bearer {token}{_KVSEP}{_KVSEP}".encode()
