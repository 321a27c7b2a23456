"""Kafka's JAAS configuration syntax, as `sasl.jaas.config` values hold it (Kafka's JaasConfig).

`<LoginModule class> <flag> [<name>=<value> ...];` where a value is a double-quoted string (with
backslash escapes) or a bare word. A `sasl.jaas.config` holds exactly one login module, as Kafka
requires; anything else is a `JaasConfigError` naming what is wrong.

Callers: listener.py (the broker's SASL listeners and its own credentials).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<sym>[=;]))', re.S)


class JaasConfigError(ValueError):
    """A `sasl.jaas.config` value that Kafka would refuse."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> JaasEntry:
    """The single login module of a `sasl.jaas.config` value."""
    tokens = _tokens(text)
    entries = []
    while tokens:
        entries.append(_entry(tokens))
    if len(entries) != 1:
        raise JaasConfigError(
            f"Must supply exactly 1 non-null JAAS mechanism configuration (size was {len(entries)})"
        )
    return entries[0]


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position, text = [], 0, text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise JaasConfigError(f"unexpected character at offset {position} of the JAAS config")
        kind = match.lastgroup or "word"
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    tokens.reverse()
    return tokens


def _entry(tokens: list[tuple[str, str]]) -> JaasEntry:
    module = _expect(tokens, "word", "a login module class name")
    flag = _expect(tokens, "word", "a control flag").lower()
    if flag not in CONTROL_FLAGS:
        raise JaasConfigError(f"Invalid JAAS config: invalid control flag {flag!r} for {module}")
    options: dict[str, str] = {}
    while True:
        kind, value = _pop(tokens, "an option or ';'")
        if (kind, value) == ("sym", ";"):
            return JaasEntry(module, flag, options)
        if kind != "word":
            raise JaasConfigError(f"Invalid JAAS config: expected an option name, found {value!r}")
        if _pop(tokens, "'='") != ("sym", "="):
            raise JaasConfigError(f"Invalid JAAS config: option {value} has no '='")
        value_kind, option = _pop(tokens, f"a value for option {value}")
        if value_kind == "sym":
            raise JaasConfigError(f"Invalid JAAS config: option {value} has no value")
        options[value] = option


def _pop(tokens: list[tuple[str, str]], wanted: str) -> tuple[str, str]:
    if not tokens:
        raise JaasConfigError(f"Invalid JAAS config: expected {wanted} (is the final ';' missing?)")
    return tokens.pop()


def _expect(tokens: list[tuple[str, str]], kind: str, wanted: str) -> str:
    found_kind, value = _pop(tokens, wanted)
    if found_kind != kind:
        raise JaasConfigError(f"Invalid JAAS config: expected {wanted}, found {value!r}")
    return value
