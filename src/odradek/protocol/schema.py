"""The shape of a Kafka message spec, as the generated `messages/` modules describe it.

Owns: `Versions` (an inclusive version range), `FieldSpec`, `StructSpec` and `MessageSpec`. These are
the facts taken from Kafka's JSON message schemas: field names, wire types, the versions a field is
present / nullable / tagged in, and tag numbers. Defaults are not repeated here: they live on the
generated dataclasses themselves.

Invariants: specs are immutable values built once at import of a `messages/` module. Field order in a
`StructSpec` is the schema order, which is also the dataclass field order and the wire order of the
non-tagged fields.

Called by: the generated `messages/` modules (to declare themselves), `codec` (to compile encoders and
decoders), `api_keys` and tests (to build generic strategies).
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION_MAX = 0x7FFF
"""Upper bound standing for "and every later version" (`"3+"`)."""

FIXED_SIZES = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
}
PRIMITIVE_TYPES = frozenset(FIXED_SIZES) | {"string", "bytes", "records"}


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; empty when `hi < lo`."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.hi < self.lo

    @classmethod
    def parse(cls, text: str) -> Versions:
        """Parse Kafka's version syntax: `"none"`, `"3"`, `"0-7"` or `"5+"`."""
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), VERSION_MAX)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))


NO_VERSIONS = Versions(0, -1)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a struct. `type` is Kafka's type name (`int32`, `string`, `[]int32`,
    `[]TopicProduceData`, `LeaderIdAndEpoch`, `records`); `struct` describes the element struct of
    struct-typed and struct-array fields."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tagged: Versions = NO_VERSIONS
    tag: int | None = None
    struct: StructSpec | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The element type of an array field, or the field's own type."""
        return self.type[2:] if self.is_array else self.type

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged


@dataclass(frozen=True, slots=True)
class StructSpec:
    """A struct: the generated dataclass and its fields in schema order."""

    cls: type
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A top-level message: a request, a response, or a `data` message (e.g. the consumer protocol)."""

    name: str
    kind: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: StructSpec

    @property
    def cls(self) -> type:
        return self.struct.cls

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions
