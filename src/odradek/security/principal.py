"""`KafkaPrincipal`: who a connection's requests come from, as Kafka names it.

Owns the value `KafkaPrincipal(principal_type, name)`, written `type:name` (`User:ANONYMOUS`), and
`principal_for(security_protocol)`, Kafka's DefaultKafkaPrincipalBuilder: a PLAINTEXT connection
is `ANONYMOUS` (User:ANONYMOUS). The network layer sets it once per connection, at accept; the
request path carries it in every RequestContext (server/context.py).

A SASL_PLAINTEXT connection starts as `ANONYMOUS` too and gets `User:<authorization id>` once it has
authenticated (security/sasl/authenticator.py); until then the SASL gate lets none of its requests
but ApiVersions and the SASL exchange through. SSL is not served yet.

Callers: the network layer (server/socket_server.py), the authorizer hook (authorizer.py).
"""

from __future__ import annotations

from typing import NamedTuple

PLAINTEXT = "PLAINTEXT"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def principal_for(security_protocol: str) -> KafkaPrincipal:
    """The principal of a connection of `security_protocol` before any authentication."""
    if security_protocol not in (PLAINTEXT, SASL_PLAINTEXT):
        raise ValueError(
            f"security protocol {security_protocol} is not supported ({PLAINTEXT}, {SASL_PLAINTEXT})"
        )
    return ANONYMOUS
