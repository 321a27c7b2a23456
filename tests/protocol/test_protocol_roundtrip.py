"""Property tests over every generated message: round trips, truncation and garbage input.

The strategy is built from the specs themselves, so every request, response and data message of
every version is covered: each field present in the version gets a random value of its wire type
(None where the version allows null), absent fields keep their defaults.
"""

from __future__ import annotations

import dataclasses
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol.messages import DATA_SPECS, MESSAGE_SPECS
from odradek.protocol.primitives import ProtocolDecodeError
from odradek.protocol.schema import FieldSpec, MessageSpec, StructSpec

ALL_SPECS = [s for pair in MESSAGE_SPECS.values() for s in pair] + list(DATA_SPECS.values())
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
UINT_BITS = {"uint16": 16, "uint32": 32}
FAST = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))


def scalar_strategy(type_: str) -> st.SearchStrategy:
    if type_ in INT_BITS:
        bits = INT_BITS[type_]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if type_ in UINT_BITS:
        return st.integers(0, 2 ** UINT_BITS[type_] - 1)
    return {
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": st.uuids(),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=12),
    }[type_]


def field_strategy(f: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy:
    if f.is_array:
        if f.struct is not None:
            element = struct_strategy(f.struct, version, flexible)
        else:
            element = scalar_strategy(f.element_type)
        values = st.lists(element, max_size=2)
    elif f.struct is not None:
        values = struct_strategy(f.struct, version, flexible)
    else:
        values = scalar_strategy(f.type)
    may_be_none = version in f.nullable or (f.struct is not None and not f.is_array and f.tag is not None)
    return st.none() | values if may_be_none else values


def struct_strategy(spec: StructSpec, version: int, flexible: bool) -> st.SearchStrategy:
    present = {
        f.name: field_strategy(f, version, flexible)
        for f in spec.fields
        if version in f.versions and (flexible or not f.is_tagged_in(version))
    }
    return st.builds(spec.cls, **present)


def message_strategy(spec: MessageSpec, version: int) -> st.SearchStrategy:
    return struct_strategy(spec.struct, version, spec.is_flexible(version))


def normalized(value: object) -> object:
    """The value with zero-copy memoryviews turned into bytes, for equality checks."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if dataclasses.is_dataclass(value):
        changes = {f.name: normalized(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def versions(spec: MessageSpec) -> range:
    return range(spec.valid_versions.lo, spec.valid_versions.hi + 1)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name)
@FAST
@given(data=st.data())
def test_every_version_round_trips(spec: MessageSpec, data: st.DataObject) -> None:
    for version in versions(spec):
        message = data.draw(message_strategy(spec, version), label=f"v{version}")
        encoded = codec.encode_message(spec, version, message)
        decoded = codec.decode_message(spec, version, encoded)
        assert normalized(decoded) == message
        assert codec.encode_message(spec, version, decoded) == encoded


TRUNCATION_APIS = [
    "ProduceRequest",
    "FetchResponse",
    "MetadataResponse",
    "ApiVersionsRequest",
    "JoinGroupRequest",
]


@pytest.mark.parametrize("name", TRUNCATION_APIS)
@FAST
@given(data=st.data())
def test_every_strict_prefix_raises_decode_error(name: str, data: st.DataObject) -> None:
    spec = next(s for s in ALL_SPECS if s.name == name)
    version = data.draw(st.sampled_from(versions(spec)), label="version")
    encoded = codec.encode_message(spec, version, data.draw(message_strategy(spec, version)))
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolDecodeError):
            codec.decode_message(spec, version, encoded[:cut])


FUZZ_SPECS = [s for s in ALL_SPECS if s.api_key in (0, 1, 2, 3, 8, 9, 10, 11, 18, 19)]


@pytest.mark.parametrize("spec", FUZZ_SPECS, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None)
@given(garbage=st.binary(max_size=64), version_index=st.integers(0, 100))
def test_garbage_decodes_or_raises_decode_error_only(
    spec: MessageSpec, garbage: bytes, version_index: int
) -> None:
    version = versions(spec)[version_index % len(versions(spec))]
    try:
        codec.decode_message(spec, version, garbage)
    except ProtocolDecodeError:
        pass


REQUEST_SPECS = [pair[0] for pair in MESSAGE_SPECS.values()]
COUNT_LIES = [bytes.fromhex("7fffffff"), bytes.fromhex("00ffffff"), bytes.fromhex("ffffffff0f")]
DECODE_OVERHEAD = 64 * 1024  # traced bytes any decode may take, whatever the payload's size
DECODE_BYTES_PER_BYTE = 200  # and per payload byte: Python objects for fields of a few bytes


@pytest.mark.parametrize("spec", REQUEST_SPECS, ids=lambda s: s.name)
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_lying_count_allocates_no_more_than_the_payload_allows(
    spec: MessageSpec, data: st.DataObject
) -> None:
    """Any request, with a count announcing up to 2**31-1 elements written over any of its bytes:
    the decoder refuses it or decodes what is there, never allocating from the announced count."""
    version = data.draw(st.sampled_from(versions(spec)), label="version")
    encoded = bytearray(codec.encode_message(spec, version, data.draw(message_strategy(spec, version))))
    codec.decode_message(spec, version, bytes(encoded))  # compiles and caches the decoder first
    lie = data.draw(st.sampled_from(COUNT_LIES), label="lie")
    at = data.draw(st.integers(0, len(encoded)), label="at")
    encoded[at : at + len(lie)] = lie
    tracemalloc.start()
    try:
        try:
            codec.decode_message(spec, version, bytes(encoded))
        except ProtocolDecodeError:
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < DECODE_OVERHEAD + DECODE_BYTES_PER_BYTE * len(encoded)
