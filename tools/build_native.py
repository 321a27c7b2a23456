"""Compile odradek's hot modules (the per-record loops, the wire primitives, the request header) with
mypyc, in place next to their sources.

The modules in NATIVE_MODULES are plain, fully typed Python. Compiled, the extension module sits
beside the source (`record_loops.cpython-311-x86_64-linux-gnu.so` next to `record_loops.py`) and Python
imports it in preference to the source; without it the source runs as it is, just slower. A module is
rebuilt when its extension is missing or older than its source. Best effort: when mypyc or a C
compiler is missing, this says so and exits 0, and odradek runs the pure-Python modules.

    python tools/build_native.py           # build what is stale
    python tools/build_native.py --clean   # remove the compiled modules (back to pure Python)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
NATIVE_MODULES = [
    "odradek/protocol/records/record_loops.py",  # the per-record loops
    "odradek/protocol/primitives.py",  # every request's and response's fields
    "odradek/protocol/headers.py",  # every request's header
    "odradek/protocol/records/validation.py",  # every produced batch's checks
]


def compiled_files(source: Path) -> list[Path]:
    """The extension modules mypyc leaves for `source` (the module and its runtime group)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return [source.with_name(source.stem + suffix), source.with_name(source.stem + "__mypyc" + suffix)]


def is_current(source: Path) -> bool:
    built = compiled_files(source)
    return all(path.exists() and path.stat().st_mtime >= source.stat().st_mtime for path in built)


def clean(modules: list[str] = NATIVE_MODULES) -> None:
    for module in modules:
        for path in compiled_files(SRC / module):
            path.unlink(missing_ok=True)


def build(modules: list[str]) -> int:
    """Run mypyc on each of `modules` (paths relative to src/) on its own: each extension, with its
    runtime group, lands beside its source, and a call from one compiled module into another goes
    through the other's module attributes as from Python (so a test may still replace them)."""
    for module in modules:
        with tempfile.TemporaryDirectory(prefix="odradek-native-") as scratch:
            result = subprocess.run(
                [sys.executable, "-m", "mypyc", module],
                cwd=SRC,
                env={**os.environ, "MYPY_CACHE_DIR": str(Path(scratch) / "mypy-cache")},
                capture_output=True,
                text=True,
            )
        shutil.rmtree(SRC / "build", ignore_errors=True)  # mypyc's build directory
        if result.returncode != 0:
            print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", file=sys.stderr)
            print(f"mypyc failed on {module}: it stays pure Python", file=sys.stderr)
            continue
        print(f"compiled with mypyc: {module}")
    return 0


def _has_c_compiler() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        return 0
    stale = [module for module in NATIVE_MODULES if not is_current(SRC / module)]
    if not stale:
        print("compiled modules are current")
        return 0
    if importlib.util.find_spec("mypyc") is None or not _has_c_compiler():
        print("mypyc or a C compiler is missing: odradek's hot loops stay pure Python", file=sys.stderr)
        return 0
    clean(stale)  # a stale extension would shadow the new source if the build failed
    return build(stale)


if __name__ == "__main__":
    sys.exit(main())
