"""Java regular expressions (`java.util.regex.Pattern`, the dialect of Spark's `subscribePattern`) as
Python `re` patterns.

Owns `to_python_regex`: the translation of the Java constructs that Python spells differently or not
at all, so a pattern copied from a Spark job selects the same topics:
- `\\Q...\\E` quoting becomes escaped text;
- named groups `(?<name>...)` and back-references `\\k<name>` become `(?P<name>...)` / `(?P=name)`;
- POSIX classes `\\p{Lower}`, `\\p{Upper}`, `\\p{Alpha}`, `\\p{Digit}`, `\\p{Alnum}`, `\\p{Punct}`,
  `\\p{XDigit}`, `\\p{Space}`, `\\p{Blank}`, `\\p{Cntrl}`, `\\p{Graph}`, `\\p{Print}`, `\\p{ASCII}`
  (and `\\P{...}` outside a character class) become explicit ASCII classes, as in Java;
- `\\z` (end of input) becomes `\\Z`; Java's `\\Z` (end, but for a final line terminator) becomes
  `(?=\\n?\\Z)`.
Constructs with no Python equivalent are refused with `JavaRegexError` naming them: character class
intersection (`&&`), nested classes (`[a[bc]]`, a union in Java), `\\P{...}` inside a class and other
`\\p{...}` names. Everything else (quantifiers including possessive ones, atomic groups,
look-arounds, inline flags, `\\d \\w \\s \\b`) means the same in both and passes through.

Invariant: pure; the result compiles with `re` to the same matches as the Java pattern over topic
names (ASCII letters, digits, '.', '_', '-'). Callers: odradek.spark.options.
"""

from __future__ import annotations

_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": r"!-/:-@\[-`{-~",
    "XDigit": "0-9a-fA-F",
    "Space": r" \t\n\x0b\f\r",
    "Blank": r" \t",
    "Cntrl": r"\x00-\x1f\x7f",
    "Graph": r"!-~",
    "Print": r" -~",
    "ASCII": r"\x00-\x7f",
}


class JavaRegexError(ValueError):
    """The Java pattern uses a construct that has no Python `re` equivalent."""


def to_python_regex(pattern: str) -> str:
    """The Python `re` spelling of the Java regular expression `pattern`."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            text, i = _escape(pattern, i, in_class)
            out.append(text)
            continue
        if in_class:
            if char == "[":
                raise JavaRegexError("nested character classes (a union in Java) are not supported")
            if pattern.startswith("&&", i):
                raise JavaRegexError("character class intersection '&&' is not supported")
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            out.append(char)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):
                out.append(r"\]")
                i += 1
            continue
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """Translate the escape sequence at `i`; return its Python text and the index after it."""
    letter = pattern[i + 1]
    if letter == "Q":
        end = pattern.find("\\E", i + 2)
        end = len(pattern) if end < 0 else end
        quoted = "".join("\\" + c if not c.isalnum() else c for c in pattern[i + 2 : end])
        return quoted, min(end + 2, len(pattern))
    if letter in "pP":
        return _posix(pattern, i, negated=letter == "P", in_class=in_class)
    if letter == "k" and pattern.startswith("<", i + 2):
        end = pattern.index(">", i)
        return f"(?P={pattern[i + 3 : end]})", end + 1
    if letter == "z":
        return r"\Z", i + 2
    if letter == "Z":
        return r"(?=\n?\Z)", i + 2
    return pattern[i : i + 2], i + 2


def _posix(pattern: str, i: int, *, negated: bool, in_class: bool) -> tuple[str, int]:
    if pattern.startswith("{", i + 2):
        end = pattern.find("}", i)
        name, after = pattern[i + 3 : end], end + 1
    else:
        name, after = pattern[i + 2 : i + 3], i + 3
    if name not in _POSIX:
        raise JavaRegexError(f"the character class \\{pattern[i + 1]}{{{name}}} is not supported")
    if in_class and negated:
        raise JavaRegexError(f"\\P{{{name}}} inside a character class is not supported")
    ranges = _POSIX[name]
    if in_class:
        return ranges, after
    return f"[{'^' if negated else ''}{ranges}]", after
