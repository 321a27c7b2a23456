"""`make test` compiles the modules of tools/build_native.py with mypyc; a missing or stale build would
run the slow path, or shadow an edit of the source with the old code."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "build_native.py"


def native_modules() -> list[str]:
    spec = importlib.util.spec_from_file_location("build_native", TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return list(tool.NATIVE_MODULES)


@pytest.mark.parametrize("path", native_modules())
def test_each_native_module_is_compiled_from_its_current_source(path: str) -> None:
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    compiled = Path(module.__file__ or "")
    source = compiled.with_name(Path(path).name)
    assert compiled.suffix == ".so", f"{path} is not compiled: run python tools/build_native.py"
    assert compiled.stat().st_mtime >= source.stat().st_mtime, (
        f"{path} is stale: run python tools/build_native.py"
    )
