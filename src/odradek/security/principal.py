"""`KafkaPrincipal`: who a connection's requests come from, as Kafka names it.

Owns the value `KafkaPrincipal(principal_type, name)`, written `type:name` (`User:ANONYMOUS`), and
`principal_for(security_protocol)`, Kafka's DefaultKafkaPrincipalBuilder: a PLAINTEXT connection
is `ANONYMOUS` (User:ANONYMOUS). The network layer sets it once per connection, at accept; the
request path carries it in every RequestContext (server/context.py).

Deliberate deviation: only PLAINTEXT is served, so no other security protocol has a principal yet
(SSL and SASL authentication come with the security issue).

Callers: the network layer (server/socket_server.py), the authorizer hook (authorizer.py).
"""

from __future__ import annotations

from typing import NamedTuple

PLAINTEXT = "PLAINTEXT"
USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def principal_for(security_protocol: str) -> KafkaPrincipal:
    """The principal of a connection of `security_protocol` before any authentication."""
    if security_protocol != PLAINTEXT:
        raise ValueError(f"security protocol {security_protocol} is not supported (only {PLAINTEXT})")
    return ANONYMOUS
