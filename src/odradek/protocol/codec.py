"""Encode and decode Kafka messages at a given version.

Owns: the public codec entry points (`decode_request`, `encode_response`, `encode_request`,
`decode_response`, and `encode_message` / `decode_message` for any `MessageSpec`, e.g. the consumer
protocol `data` messages), `encode_element`, `encoded_size`, and the compiler behind them.

Theory of operation: for each (struct, version) the compiler writes the Python source of one
specialised decoder and one encoder from the struct's `FieldSpec`s, `exec`s it once at first use and
caches it. Consecutive fixed-width fields are read and written with a single `struct.Struct`; the
schema is never walked per call. Decoders work on `(memoryview, position)`; encoders append to one
`bytearray` and push `FileSlice` parts of `records` fields into the chunk list as separate chunks.

Invariants:
- Decoding raises only `ProtocolDecodeError` for bad input (never `IndexError`/`struct.error`) and
  `UnsupportedVersionError` for an unknown API key or version. Unknown tagged fields are skipped.
  Fields absent from a version keep their dataclass default. Trailing bytes after the body are
  ignored.
- Decoded `records` fields are zero-copy `memoryview` slices of the payload: they alias the caller's
  buffer and are valid only as long as it is.
- An element of a struct array may be given pre-encoded: the `bytes` that `encode_element` made of
  it for that message and version are written as they are (the fetch handler's idle partitions).
- Encoding ignores fields absent from the version, writes a tagged field only when it differs from
  its default, and raises `ProtocolEncodeError` naming the field for a null that the version does not
  allow (or for any other value that cannot be encoded).

Called by: the network layer and dispatcher (server side), `odradek.client` and tests (client side).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from odradek.protocol import primitives as p
from odradek.protocol.messages import MESSAGE_SPECS
from odradek.protocol.primitives import (
    FileSlice,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedVersionError,
)
from odradek.protocol.schema import FIXED_SIZES, FieldSpec, MessageSpec, StructSpec

Chunk = bytes | FileSlice
Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[bytearray, list, Any], None]

_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)
_ENCODE_ERRORS = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


# ---------------------------------------------------------------------------------------------
# public entry points


def decode_request(api_key: int, api_version: int, payload: bytes | bytearray | memoryview) -> Any:
    """Decode a request body (the bytes after the request header)."""
    found = _request_decoders.get((api_key, api_version))
    if found is None:
        found = _request_decoders[(api_key, api_version)] = _api_decoder(api_key, api_version, 0)
    return _decode(*found, payload)


def decode_response(api_key: int, api_version: int, payload: bytes | bytearray | memoryview) -> Any:
    """Decode a response body (the bytes after the response header)."""
    return _decode(*_api_decoder(api_key, api_version, 1), payload)


def encode_response(api_key: int, api_version: int, message: Any) -> list[Chunk]:
    """Encode a response body as chunks: bytes, with each `FileSlice` of a records field apart."""
    found = _response_encoders.get((api_key, api_version))
    if found is None:
        found = _response_encoders[(api_key, api_version)] = _api_encoder(api_key, api_version, 1)
    return _encode_chunks(*found, message)


def encode_request(api_key: int, api_version: int, message: Any) -> bytes:
    """Encode a request body to bytes (records fields must be bytes-like)."""
    return encode_message(_spec(api_key, api_version, 0), api_version, message)


def encoded_size(chunks: list[Chunk]) -> int:
    """Total number of bytes the chunks stand for."""
    return sum(c.length if type(c) is FileSlice else len(c) for c in chunks)


def decode_message(spec: MessageSpec, version: int, payload: bytes | bytearray | memoryview) -> Any:
    """Decode any message (request, response or data message) at `version`."""
    return _decode(spec, version, _message_decoder(spec, version), payload)


def encode_message_chunks(spec: MessageSpec, version: int, message: Any) -> list[Chunk]:
    """Encode any message at `version` as a list of chunks."""
    return _encode_chunks(spec, version, _message_encoder(spec, version), message)


def _decode(
    spec: MessageSpec, version: int, decoder: Decoder, payload: bytes | bytearray | memoryview
) -> Any:
    buf = payload if type(payload) is memoryview else memoryview(payload)
    try:
        return decoder(buf, 0)[0]
    except ProtocolDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"malformed {spec.name} v{version}: {exc}") from None


def _encode_chunks(spec: MessageSpec, version: int, encoder: Encoder, message: Any) -> list[Chunk]:
    if type(message) is not spec.cls:
        raise ProtocolEncodeError(f"expected {spec.name}, got {type(message).__name__}")
    out = bytearray()
    chunks: list[Chunk] = []
    try:
        encoder(out, chunks, message)
    except ProtocolEncodeError:
        raise
    except _ENCODE_ERRORS as exc:
        raise ProtocolEncodeError(f"cannot encode {spec.name} v{version}: {exc}") from None
    if out or not chunks:
        chunks.append(bytes(out))
    return chunks


def encode_message(spec: MessageSpec, version: int, message: Any) -> bytes:
    """Encode any message at `version` to bytes; `FileSlice` records are refused."""
    chunks = encode_message_chunks(spec, version, message)
    if any(type(c) is FileSlice for c in chunks):
        raise ProtocolEncodeError(f"{spec.name}: a FileSlice cannot be encoded to bytes")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def encode_element(spec: MessageSpec, version: int, element: Any) -> bytes:
    """The wire form of `element`, an instance of one of `spec`'s nested structs, at `version`: a
    pre-encoded element for a struct array of that message (see the module docstring)."""
    struct_spec = _nested_struct(spec.struct, type(element))
    if struct_spec is None:
        raise ProtocolEncodeError(f"{spec.name} has no struct {type(element).__name__}")
    encoder = _struct_encoder(struct_spec, version, spec.is_flexible(version), spec.name)
    out = bytearray()
    chunks: list[Chunk] = []
    encoder(out, chunks, element)
    if chunks:
        raise ProtocolEncodeError(f"{spec.name}: a FileSlice cannot be pre-encoded")
    return bytes(out)


def _nested_struct(spec: StructSpec, cls: type) -> StructSpec | None:
    for f in spec.fields:
        if f.struct is not None:
            found = f.struct if f.struct.cls is cls else _nested_struct(f.struct, cls)
            if found is not None:
                return found
    return None


def _message_decoder(spec: MessageSpec, version: int) -> Decoder:
    return _struct_decoder(spec.struct, version, spec.is_flexible(version), spec.name)


def _message_encoder(spec: MessageSpec, version: int) -> Encoder:
    return _struct_encoder(spec.struct, version, spec.is_flexible(version), spec.name)


def _api_decoder(api_key: int, version: int, side: int) -> tuple[MessageSpec, int, Decoder]:
    spec = _spec(api_key, version, side)
    return spec, version, _message_decoder(spec, version)


def _api_encoder(api_key: int, version: int, side: int) -> tuple[MessageSpec, int, Encoder]:
    spec = _spec(api_key, version, side)
    return spec, version, _message_encoder(spec, version)


def _spec(api_key: int, version: int, side: int) -> MessageSpec:
    specs = MESSAGE_SPECS.get(api_key)
    if specs is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    spec = specs[side]
    if version not in spec.valid_versions:
        raise UnsupportedVersionError(f"{spec.name} has no version {version}")
    return spec


# ---------------------------------------------------------------------------------------------
# the compiler

_request_decoders: dict[tuple[int, int], tuple[MessageSpec, int, Decoder]] = {}  # by (api key, version)
_response_encoders: dict[tuple[int, int], tuple[MessageSpec, int, Encoder]] = {}
_decoders: dict[tuple[int, int, bool], Decoder] = {}
_encoders: dict[tuple[int, int, bool], Encoder] = {}
_keep: list[StructSpec] = []  # specs keyed by id() in the caches stay alive


def _struct_decoder(spec: StructSpec, version: int, flexible: bool, name: str) -> Decoder:
    key = (id(spec), version, flexible)
    fn = _decoders.get(key)
    if fn is None:
        fn = _decoders[key] = _DecoderCompiler(spec, version, flexible, name).compile()
        _keep.append(spec)
    return fn


def _struct_encoder(spec: StructSpec, version: int, flexible: bool, name: str) -> Encoder:
    key = (id(spec), version, flexible)
    fn = _encoders.get(key)
    if fn is None:
        fn = _encoders[key] = _EncoderCompiler(spec, version, flexible, name).compile()
        _keep.append(spec)
    return fn


class _Compiler:
    """Shared machinery: a namespace of helpers/constants and numbered names."""

    def __init__(self, spec: StructSpec, version: int, flexible: bool, name: str) -> None:
        self.spec = spec
        self.version = version
        self.flexible = flexible
        self.name = name
        self.ns: dict[str, Any] = {
            "p": p,
            "ProtocolDecodeError": ProtocolDecodeError,
            "ProtocolEncodeError": ProtocolEncodeError,
            "FileSlice": FileSlice,
        }
        self.lines: list[str] = []
        self.counter = 0
        self.defaults = _defaults(spec.cls)

    def bind(self, value: Any) -> str:
        self.counter += 1
        name = f"k{self.counter}"
        self.ns[name] = value
        return name

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def present(self) -> list[FieldSpec]:
        return [f for f in self.spec.fields if self.version in f.versions]

    def regular(self) -> list[FieldSpec]:
        return [f for f in self.present() if not f.is_tagged_in(self.version)]

    def tagged(self) -> list[FieldSpec]:
        tagged = [f for f in self.present() if f.is_tagged_in(self.version)] if self.flexible else []
        return sorted(tagged, key=lambda f: f.tag or 0)

    def where(self, f: FieldSpec) -> str:
        return f"{self.spec.cls.__qualname__}.{f.name} (v{self.version})"

    def nullable(self, f: FieldSpec) -> bool:
        return self.version in f.nullable

    def element_struct(self, f: FieldSpec, decoder: bool) -> str:
        assert f.struct is not None
        build = _struct_decoder if decoder else _struct_encoder
        return self.bind(build(f.struct, self.version, self.flexible, self.name))

    def fixed_runs(self, regular: list[FieldSpec]) -> list[list[FieldSpec] | FieldSpec]:
        """Group consecutive fixed-width scalar fields so each run is one struct call."""
        runs: list[list[FieldSpec] | FieldSpec] = []
        for f in regular:
            if f.type in _FORMATS:
                if runs and isinstance(runs[-1], list):
                    runs[-1].append(f)
                else:
                    runs.append([f])
            else:
                runs.append(f)
        return runs

    def finish(self, header: str, fn_name: str) -> Callable:
        source = header + "\n" + "\n".join(self.lines) + "\n"
        code = compile(source, f"<odradek codec {self.spec.cls.__qualname__} v{self.version}>", "exec")
        exec(code, self.ns)  # noqa: S102 - source generated from the message specs above
        return self.ns[fn_name]


def _defaults(cls: type) -> dict[str, tuple[str, Any]]:
    """For each dataclass field: ("value", constant) or ("factory", callable)."""
    out: dict[str, tuple[str, Any]] = {}
    for f in fields(cls):
        if f.default is not MISSING:
            out[f.name] = ("value", f.default)
        else:
            out[f.name] = ("factory", f.default_factory)
    return out


class _DecoderCompiler(_Compiler):
    def compile(self) -> Decoder:
        values: dict[str, str] = {}
        for run in self.fixed_runs(self.regular()):
            if isinstance(run, list):
                self.decode_fixed_run(run, values)
            else:
                values[run.name] = self.decode_field(run, 1)
        if self.flexible:
            self.decode_tagged_section(values)
        args = [values.get(name) or self.default_expr(name) for name in self.defaults]
        cls = self.bind(self.spec.cls)
        self.emit(1, f"return {cls}({', '.join(args)}), pos")
        return self.finish("def decode(buf, pos):", "decode")

    def default_expr(self, name: str) -> str:
        kind, value = self.defaults[name]
        return f"{self.bind(value)}()" if kind == "factory" else self.bind(value)

    def decode_fixed_run(self, run: list[FieldSpec], values: dict[str, str]) -> None:
        codec = struct.Struct(">" + "".join(_FORMATS[f.type] for f in run))
        names = [self.var() for _ in run]
        target = names[0] + "," if len(names) == 1 else ", ".join(names)
        self.emit(1, f"{target} = {self.bind(codec)}.unpack_from(buf, pos)")
        self.emit(1, f"pos += {codec.size}")
        values.update({f.name: v for f, v in zip(run, names, strict=True)})

    def decode_field(self, f: FieldSpec, ind: int) -> str:
        """Emit code reading field `f` at `pos`; return the local holding its value."""
        v = self.var()
        if f.is_array:
            self.decode_array(f, v, ind)
        elif f.struct is not None:
            self.decode_struct_field(f, v, ind)
        elif f.type in _FORMATS:
            codec = struct.Struct(">" + _FORMATS[f.type])
            self.emit(ind, f"{v}, = {self.bind(codec)}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {codec.size}")
        else:
            self.emit(ind, f"{v}, pos = {self.reader(f.type, self.nullable(f))}(buf, pos)")
            if f.type == "records" and not self.nullable(f):
                self.emit(ind, f"if {v} is None:")
                self.emit(ind + 1, f"raise ProtocolDecodeError('null records in {self.where(f)}')")
        return v

    def reader(self, type_: str, nullable: bool) -> str:
        if type_ == "uuid":
            return "p.read_uuid"
        if type_ == "records":
            return "p.read_compact_nullable_bytes_view" if self.flexible else "p.read_nullable_bytes_view"
        compact = "compact_" if self.flexible else ""
        null = "nullable_" if nullable else ""
        return f"p.read_{compact}{null}{type_}"

    def decode_struct_field(self, f: FieldSpec, v: str, ind: int) -> None:
        decoder = self.element_struct(f, decoder=True)
        if self.nullable(f):
            self.emit(ind, "if buf[pos] >= 128:")
            self.emit(ind + 1, f"{v} = None")
            self.emit(ind + 1, "pos += 1")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{v}, pos = {decoder}(buf, pos + 1)")
        else:
            self.emit(ind, f"{v}, pos = {decoder}(buf, pos)")

    def decode_array(self, f: FieldSpec, v: str, ind: int) -> None:
        n = self.var()
        length = "p.read_compact_array_length" if self.flexible else "p.read_array_length"
        self.emit(ind, f"{n}, pos = {length}(buf, pos)")
        self.emit(ind, f"if {n} < 0:")
        if self.nullable(f):
            self.emit(ind + 1, f"{v} = None")
        else:
            self.emit(ind + 1, f"raise ProtocolDecodeError('null array in {self.where(f)}')")
        self.emit(ind, "else:")
        elem = f.element_type
        self.emit(ind + 1, f"p.check_count(buf, pos, {n}, {max(1, self.min_size(f))})")
        if elem in _FORMATS:
            fmt, size = _FORMATS[elem], FIXED_SIZES[elem]
            self.emit(ind + 1, f"{v} = list({self.bind(struct.unpack_from)}(f'>{{{n}}}{fmt}', buf, pos))")
            self.emit(ind + 1, f"pos += {n} * {size}")
            return
        read = self.element_struct(f, decoder=True) if f.struct is not None else self.reader(elem, False)
        e = self.var()
        self.emit(ind + 1, f"{v} = []")
        self.emit(ind + 1, f"for _ in range({n}):")
        self.emit(ind + 2, f"{e}, pos = {read}(buf, pos)")
        self.emit(ind + 2, f"{v}.append({e})")

    def min_size(self, f: FieldSpec) -> int:
        """The smallest encoding of one element of array field `f`."""
        elem = f.element_type
        if elem in FIXED_SIZES:
            return FIXED_SIZES[elem]
        if f.struct is not None:
            return _struct_min_size(f.struct, self.version, self.flexible)
        return 1 if self.flexible else 2

    def decode_tagged_section(self, values: dict[str, str]) -> None:
        tagged = self.tagged()
        if not tagged:
            self.emit(1, "if buf[pos]:")
            self.emit(2, "pos = p.read_tagged_fields(buf, pos)[1]")
            self.emit(1, "else:")
            self.emit(2, "pos += 1")
            return
        for f in tagged:
            values[f.name] = self.var()
        self.emit(1, "if buf[pos] == 0:")
        self.emit(2, "pos += 1")
        for f in tagged:
            self.emit(2, f"{values[f.name]} = {self.default_expr(f.name)}")
        self.emit(1, "else:")
        for f in tagged:
            self.emit(2, f"{values[f.name]} = {self.default_expr(f.name)}")
        self.emit(2, "ntags, pos = p.read_unsigned_varint(buf, pos)")
        self.emit(2, "for _ in range(ntags):")
        self.emit(3, "tag, pos = p.read_unsigned_varint(buf, pos)")
        self.emit(3, "size, pos = p.read_unsigned_varint(buf, pos)")
        self.emit(3, "end = p.check_length(buf, pos, size)")
        for i, f in enumerate(tagged):
            self.emit(3, f"{'if' if i == 0 else 'elif'} tag == {f.tag}:")
            v = self.decode_field(f, 4)
            self.emit(4, f"{values[f.name]} = {v}")
            self.emit(4, "if pos != end:")
            self.emit(5, f"raise ProtocolDecodeError('tagged field size mismatch in {self.where(f)}')")
        self.emit(3, "pos = end")


def _struct_min_size(spec: StructSpec, version: int, flexible: bool) -> int:
    size = 1 if flexible else 0
    for f in spec.fields:
        if version not in f.versions or (flexible and f.is_tagged_in(version)):
            continue
        if f.is_array:
            size += 1 if flexible else 4
        elif f.type in FIXED_SIZES:
            size += FIXED_SIZES[f.type]
        elif f.struct is not None:
            size += 1 if version in f.nullable else _struct_min_size(f.struct, version, flexible)
        elif f.type == "string":
            size += 1 if flexible else 2
        else:
            size += 1 if flexible else 4
    return size


class _EncoderCompiler(_Compiler):
    def compile(self) -> Encoder:
        for run in self.fixed_runs(self.regular()):
            if isinstance(run, list):
                self.encode_fixed_run(run)
            else:
                self.encode_field(run, f"o.{run.name}", "b", 1)
        if self.flexible:
            self.encode_tagged_section()
        if not self.lines:
            self.emit(1, "pass")
        return self.finish("def encode(b, chunks, o):", "encode")

    def encode_fixed_run(self, run: list[FieldSpec]) -> None:
        codec = struct.Struct(">" + "".join(_FORMATS[f.type] for f in run))
        args = ", ".join(f"o.{f.name}" for f in run)
        self.emit(1, f"b += {self.bind(codec.pack)}({args})")

    def null_branch(self, f: FieldSpec, v: str, out: str, ind: int, null_bytes: bytes) -> None:
        self.emit(ind, f"if {v} is None:")
        if self.nullable(f):
            self.emit(ind + 1, f"{out} += {null_bytes!r}")
        else:
            self.emit(ind + 1, f"raise ProtocolEncodeError('null is not allowed for {self.where(f)}')")

    def encode_field(self, f: FieldSpec, expr: str, out: str, ind: int) -> None:
        if f.type in _FORMATS:
            codec = struct.Struct(">" + _FORMATS[f.type])
            self.emit(ind, f"{out} += {self.bind(codec.pack)}({expr})")
            return
        v = self.var()
        self.emit(ind, f"{v} = {expr}")
        if f.is_array:
            self.null_branch(f, v, out, ind, b"\x00" if self.flexible else b"\xff\xff\xff\xff")
            self.emit(ind, "else:")
            self.encode_array(f, v, out, ind + 1)
        elif f.struct is not None:
            self.null_branch(f, v, out, ind, b"\xff")
            self.emit(ind, "else:")
            if self.nullable(f):
                self.emit(ind + 1, f"{out}.append(1)")
            self.emit(ind + 1, f"{self.element_struct(f, decoder=False)}({out}, chunks, {v})")
        elif f.type == "records":
            self.null_branch(f, v, out, ind, b"\x00" if self.flexible else b"\xff\xff\xff\xff")
            self.emit(ind, "else:")
            self.encode_records(v, out, ind + 1)
        else:
            self.null_branch(f, v, out, ind, self.null_scalar(f.type))
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{self.writer(f.type)}({out}, {v})")

    def null_scalar(self, type_: str) -> bytes:
        if self.flexible:
            return b"\x00"
        return b"\xff\xff" if type_ == "string" else b"\xff\xff\xff\xff"

    def writer(self, type_: str) -> str:
        if type_ == "uuid":
            return self.bind(_write_uuid)
        compact = "compact_" if self.flexible else ""
        return f"p.write_{compact}nullable_{type_}"

    def encode_records(self, v: str, out: str, ind: int) -> None:
        self.emit(ind, f"if type({v}) is bytes:")
        self.emit_length(f"len({v})", out, ind + 1)
        self.emit(ind + 1, f"{out} += {v}")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{self.length_writer()}({out}, p.records_size({v}))")
        self.emit(ind + 1, f"p.write_records_parts({out}, chunks, {v})")

    def length_writer(self) -> str:
        return self.bind(_write_compact_length if self.flexible else _write_int32_length)

    def emit_length(self, length: str, out: str, ind: int) -> None:
        """A length prefix; a compact one below 127 is a single byte appended in place."""
        if not self.flexible:
            self.emit(ind, f"{self.length_writer()}({out}, {length})")
            return
        n = self.var()
        self.emit(ind, f"{n} = {length}")
        self.emit(ind, f"if {n} < 127:")
        self.emit(ind + 1, f"{out}.append({n} + 1)")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{self.length_writer()}({out}, {n})")

    def encode_array(self, f: FieldSpec, v: str, out: str, ind: int) -> None:
        self.emit_length(f"len({v})", out, ind)
        elem = f.element_type
        if elem in _FORMATS:
            self.emit(ind, f"{out} += {self.bind(struct.pack)}(f'>{{len({v})}}{_FORMATS[elem]}', *{v})")
            return
        e = self.var()
        self.emit(ind, f"for {e} in {v}:")
        if f.struct is not None:
            self.emit(ind + 1, f"if type({e}) is bytes:")  # pre-encoded by `encode_element`
            self.emit(ind + 2, f"{out} += {e}")
            self.emit(ind + 1, "else:")
            self.emit(ind + 2, f"{self.element_struct(f, decoder=False)}({out}, chunks, {e})")
            return
        self.emit(ind + 1, f"if {e} is None:")
        self.emit(ind + 2, f"raise ProtocolEncodeError('null element in {self.where(f)}')")
        self.emit(ind + 1, f"{self.writer(elem)}({out}, {e})")

    def encode_tagged_section(self) -> None:
        tagged = self.tagged()
        if not tagged:
            self.emit(1, "b.append(0)")
            return
        names = [self.var() for _ in tagged]
        for f, v in zip(tagged, names, strict=True):
            self.emit(1, f"{v} = o.{f.name}")
        differs = [self.differs_from_default(f, v) for f, v in zip(tagged, names, strict=True)]
        self.emit(1, f"if not ({' or '.join(differs)}):")  # the usual case: no tagged field
        self.emit(2, "b.append(0)")
        self.emit(2, "return")
        self.emit(1, "tags = []")
        for f, v, test in zip(tagged, names, differs, strict=True):
            self.emit(1, f"if {test}:")
            self.emit(2, "t = bytearray()")
            self.encode_field(f, v, "t", 2)
            self.emit(2, f"tags.append(({f.tag}, t))")
        self.emit(1, "p.write_unsigned_varint(b, len(tags))")
        self.emit(1, "for tag, t in tags:")
        self.emit(2, "p.write_unsigned_varint(b, tag)")
        self.emit(2, "p.write_unsigned_varint(b, len(t))")
        self.emit(2, "b += t")

    def differs_from_default(self, f: FieldSpec, v: str) -> str:
        kind, value = self.defaults[f.name]
        if kind == "factory":
            return f"{v} != {self.bind(value)}()"
        if value is None:
            return f"{v} is not None"
        return f"{v} != {self.bind(value)}"


def _write_uuid(out: bytearray, value: Any) -> None:
    out += value.bytes


def _write_compact_length(out: bytearray, n: int) -> None:
    if n < 127:
        out.append(n + 1)
    else:
        out += p.unsigned_varint_bytes(n + 1)


_INT32_PACK = p.INT32.pack


def _write_int32_length(out: bytearray, n: int) -> None:
    out += _INT32_PACK(n)
