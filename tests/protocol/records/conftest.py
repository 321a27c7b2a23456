"""Every records test runs twice: against `record_loops` as Python imports it (compiled with mypyc by
`make test`, see tools/build_native.py) and against its Python source, so both stay correct."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from odradek.protocol.records import record, record_loops, section, validation

LOOPS_SOURCE = Path(record_loops.__file__).with_name("record_loops.py")


def load_loops_source() -> ModuleType:
    """`record_loops` run from its Python source, even where the compiled module is what imports."""
    spec = importlib.util.spec_from_file_location("record_loops_source", LOOPS_SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True, params=["imported", "source"])
def record_loops_implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "source":
        source = load_loops_source()
        monkeypatch.setattr(validation, "walk_records", source.walk_records)
        monkeypatch.setattr(validation, "walk_headers", source.walk_headers)
        monkeypatch.setattr(validation, "read_varint", source.read_varint)
        monkeypatch.setattr(section, "read_varint", source.read_varint)
        monkeypatch.setattr(record, "read_record_times", source.read_record_times)
        monkeypatch.setattr(record, "decode_records_into", source.decode_records_into)
    return str(request.param)
