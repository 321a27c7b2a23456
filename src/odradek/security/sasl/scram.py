"""SCRAM (RFC 5802) as Kafka uses it: SCRAM-SHA-256 and SCRAM-SHA-512, credentials and arithmetic.

Owns `ScramMechanism` (Kafka's names, the type ids of the SCRAM credential APIs, 4096..16384
iterations), `ScramCredential` (salt, stored key, server key, iterations) and its text form as Kafka
stores it in `/config/users/<user>`: `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`
(Kafka's ScramCredentialUtils), and the derivations: a credential from a password, or from the salt
and salted password that AlterUserScramCredentials carries.

Callers: mechanisms.py (server and client exchanges), the SCRAM credential handlers and
`odradek configs --entity-type users`.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import os
from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramMechanism(enum.Enum):
    """Kafka's ScramMechanism: (mechanism name, type id in the SCRAM credential APIs, hash)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def type_id(self) -> int:
        return self.value[1]

    @property
    def hash_name(self) -> str:
        return self.value[2]

    @classmethod
    def named(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def of_type(cls, type_id: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type_id == type_id), None)

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's stored form (ScramCredentialUtils.credentialToString)."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        """Parse the stored form; ValueError when a part is missing or malformed."""
        parts = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                base64.b64decode(parts["salt"], validate=True),
                base64.b64decode(parts["stored_key"], validate=True),
                base64.b64decode(parts["server_key"], validate=True),
                int(parts["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"invalid SCRAM credential: {exc}") from None


def credential_from_salted(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential that AlterUserScramCredentials describes by its salt and salted password."""
    stored_key = mechanism.hash(mechanism.client_key(salted_password))
    return ScramCredential(salt, stored_key, mechanism.server_key(salted_password), iterations)


def credential_from_password(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for `password`, with a random salt unless one is given."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(
        mechanism, salt, mechanism.salted_password(password, salt, iterations), iterations
    )


def check_iterations(iterations: int) -> str | None:
    """Kafka's bounds on a stored credential's iterations; the complaint, or None when within them."""
    if iterations < MIN_ITERATIONS:
        return f"Too few iterations: {iterations} is less than the minimum {MIN_ITERATIONS}"
    if iterations > MAX_ITERATIONS:
        return f"Too many iterations: {iterations} is more than the maximum {MAX_ITERATIONS}"
    return None


def xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def sasl_name(username: str) -> str:
    """A username as a SCRAM message carries it (',' and '=' escaped)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username(saslname: str) -> str:
    """The username a SCRAM `n=` attribute names; ValueError on a bad escape."""
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def attributes(message: str) -> dict[str, str]:
    """The `k=value` attributes of a SCRAM message, in order; ValueError on a malformed one."""
    result: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"Invalid SCRAM message attribute {part!r}")
        result.setdefault(key, value)
    return result
