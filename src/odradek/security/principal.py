"""`KafkaPrincipal`: who a connection's requests come from, as Kafka names it.

Owns the value `KafkaPrincipal(principal_type, name)`, written `type:name` (`User:ANONYMOUS`),
`principal_for(security_protocol)`, the principal a connection has at accept (Kafka's
DefaultKafkaPrincipalBuilder before authentication: `ANONYMOUS`, on each of Kafka's four security
protocols; the broker's config decides which of them it serves), and the principal of a TLS client
certificate: `distinguished_name(subject)` writes the certificate's subject as Java's
X500Principal.getName() does (RFC 2253: the last RDN first, CN/C/L/ST/O/OU/STREET/DC/UID keywords,
`,+"\\<>;` escaped), and `SslPrincipalMapper` applies `ssl.principal.mapping.rules` to it (Kafka's
SslPrincipalMapper: `DEFAULT`, or `RULE:pattern/replacement/[LU]`, the first rule whose pattern
matches the whole name wins; `$1` in a replacement is a group; no rule matching refuses the client).
A client without a certificate (ssl.client.auth none, or requested and none sent) is User:ANONYMOUS,
as in Kafka.

A SASL_PLAINTEXT or SASL_SSL connection starts as `ANONYMOUS` too and gets `User:<authorization id>`
once it has authenticated (server/sasl_authenticator.py); until then the SASL gate lets none of
its requests but ApiVersions and the SASL exchange through. On SASL_SSL the SASL principal is the
connection's, whatever certificate the client showed (as Kafka's default principal builder).

Deliberate deviations: Java writes a subject attribute it has no keyword for as `OID=#hex`; Python's
certificate dict names it but keeps neither its OID nor its string type, so emailAddress is written
as Java writes it (`1.2.840.113549.1.9.1=#16...`) and any other such attribute as `longName=value`.

Callers: the network layer (server/socket_server.py sets the principal at accept, and for SSL after
the handshake), ssl_config.py (the mapping rules of a listener), the authorizer hook (authorizer.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
USER_TYPE = "User"

# Java's X500Principal RFC 2253 keywords, by the attribute names of Python's certificate dict.
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_EMAIL_OID = "1.2.840.113549.1.9.1"
_RULE_FLAGS: dict[str, Callable[[str], str]] = {"": str, "L": str.lower, "U": str.upper}


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def principal_for(security_protocol: str) -> KafkaPrincipal:
    """The principal of a connection of `security_protocol` before any authentication."""
    if security_protocol not in (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL):
        raise ValueError(f"security protocol {security_protocol} is not supported")
    return ANONYMOUS


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """A certificate subject (`getpeercert()["subject"]`, RDNs in certificate order) in RFC 2253."""
    return ",".join("+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject))


def _attribute(name: str, value: str) -> str:
    if name == "emailAddress":  # an IA5String Java has no keyword for: its OID and DER bytes in hex
        encoded = value.encode("ascii", "replace")
        return f"{_EMAIL_OID}=#16{len(encoded):02x}{encoded.hex()}"
    return f"{_RFC2253_KEYWORDS.get(name, name)}={_escape(value)}"


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


class _Rule(NamedTuple):
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule applies to a certificate's distinguished name."""


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules` parsed; `name(dn)` maps a distinguished name (ValueError on a
    malformed rule at construction, NoMatchingRule when no rule applies)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self._rules = _parse_rules(rules)

    def name(self, dn: str) -> str:
        for rule in self._rules:
            if rule.pattern is None:
                return dn
            match = rule.pattern.fullmatch(dn)
            if match is not None:
                return _RULE_FLAGS[rule.case](_expand(rule.replacement, match))
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self._describe()}")

    def principal(self, subject: Sequence[Sequence[tuple[str, str]]] | None) -> KafkaPrincipal:
        """The principal of a client certificate's subject; ANONYMOUS without a certificate."""
        if not subject:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name(distinguished_name(subject)))

    def _describe(self) -> str:
        return ", ".join("DEFAULT" if r.pattern is None else r.pattern.pattern for r in self._rules)


def _parse_rules(text: str) -> list[_Rule]:
    """Rules separated by commas or newlines; a RULE's pattern and replacement end at an unescaped
    `/`, so a pattern may hold commas."""
    rules, position = [], 0
    text = text.strip() or "DEFAULT"
    while position < len(text):
        position = _skip_space(text, position, " \t\r\n")
        if text.startswith("DEFAULT", position):
            rules.append(_Rule(None, "", ""))
            position += len("DEFAULT")
        elif text.startswith("RULE:", position):
            pattern, position = _until_slash(text, position + len("RULE:"))
            replacement, position = _until_slash(text, position)
            case = text[position] if position < len(text) and text[position] in "LU" else ""
            position += len(case)
            try:
                rules.append(_Rule(re.compile(pattern), replacement, case))
            except re.error as exc:
                raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None
        else:
            raise ValueError(f"Invalid rule: {text[position:]}")
        position = _skip_space(text, position)
        if position < len(text):
            if text[position] not in ",\n":
                raise ValueError(f"Invalid rule: {text[position:]}")
            position += 1
    return rules


def _skip_space(text: str, position: int, spaces: str = " \t\r") -> int:
    while position < len(text) and text[position] in spaces:
        position += 1
    return position


def _until_slash(text: str, position: int) -> tuple[str, int]:
    """The text up to the next unescaped `/` (kept escaped), and the position after that slash."""
    start = position
    while position < len(text) and text[position] != "/":
        position += 2 if text[position] == "\\" else 1
    if position >= len(text):
        raise ValueError(f"Invalid rule: RULE:{text[start:]} (a RULE is RULE:pattern/replacement/[LU])")
    return text[start:position], position + 1


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher replacement: `$n` is group n, `\\c` is c."""
    out, i = [], 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif char == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            while (
                j < len(replacement)
                and replacement[j].isdigit()
                and int(replacement[i + 1 : j + 1]) <= (match.re.groups)
            ):
                j += 1
            out.append(match.group(int(replacement[i + 1 : j])) or "")
            i = j
        else:
            out.append(char)
            i += 1
    return "".join(out)
