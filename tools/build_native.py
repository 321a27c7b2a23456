"""Compile odradek's hot modules (the per-record loops, and the modules of a Produce request's path) with
mypyc, in place next to their sources.

The modules in NATIVE_GROUPS are plain, fully typed Python. Compiled, the extension module sits
beside the source (`record_loops.cpython-311-x86_64-linux-gnu.so` next to `record_loops.py`) and Python
imports it in preference to the source; without it the source runs as it is, just slower. A group
is rebuilt when the extension of one of its modules is missing or older than its source. Best
effort: when mypyc or a C compiler is missing, this says so and exits 0, and odradek runs the
pure-Python modules.

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
# Each group is one mypyc build. Within a group, calls between its modules are direct C calls;
# from one group into another they go through the other module's attributes, as from Python, so
# the records tests can still swap `record_loops` (its own group) for its source under `validation`.
NATIVE_GROUPS = [
    ["odradek/protocol/records/record_loops.py"],  # the per-record loops
    [  # a Produce's path: modules whose classes nothing patches or subclasses (a compiled class refuses both)
        "odradek/protocol/primitives.py",  # every request's and response's fields
        "odradek/protocol/headers.py",  # every request's header
        "odradek/protocol/records/validation.py",  # every produced batch's checks
        "odradek/protocol/records/batch.py",
        "odradek/storage/segment.py",
        "odradek/storage/file_cache.py",
        "odradek/replication/delayed.py",
        "odradek/server/context.py",
        "odradek/server/dispatcher.py",
        "odradek/server/handlers/produce.py",
        "odradek/replication/partition.py",  # Partition stays a Python class (`odradek.native`)
    ],
]
NATIVE_MODULES = [module for group in NATIVE_GROUPS for module in group]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def compiled_file(module: str) -> Path:
    """The extension module mypyc leaves beside `module`'s source."""
    source = SRC / module
    return source.with_name(source.stem + SUFFIX)


def runtime_files(group: list[str]) -> list[Path]:
    """The group's shared runtime library: beside a lone module, else at the top of src/ (named by a
    hash of the group's modules; only odradek's groups leave files there)."""
    if len(group) == 1:
        source = SRC / group[0]
        return [source.with_name(source.stem + "__mypyc" + SUFFIX)]
    return list(SRC.glob("*__mypyc" + SUFFIX))


def is_current(group: list[str]) -> bool:
    def current(module: str) -> bool:
        built = compiled_file(module)
        return built.exists() and built.stat().st_mtime >= (SRC / module).stat().st_mtime

    return all(current(module) for module in group) and bool(runtime_files(group))


def clean(groups: list[list[str]] = NATIVE_GROUPS) -> None:
    for group in groups:
        for path in [compiled_file(module) for module in group] + runtime_files(group):
            path.unlink(missing_ok=True)


def build(groups: list[list[str]]) -> int:
    """Run mypyc on each group (paths relative to src/); the extensions land beside the sources."""
    with tempfile.TemporaryDirectory(prefix="odradek-native-") as scratch:
        env = {**os.environ, "MYPY_CACHE_DIR": str(Path(scratch) / "mypy-cache")}  # shared: checked once
        for group in groups:
            result = subprocess.run(
                [sys.executable, "-m", "mypyc", *group], cwd=SRC, env=env, capture_output=True, text=True
            )
            shutil.rmtree(SRC / "build", ignore_errors=True)  # mypyc's build directory
            if result.returncode != 0:
                print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", file=sys.stderr)
                print(f"mypyc failed on {', '.join(group)}: they stay pure Python", file=sys.stderr)
                continue
            print("compiled with mypyc: " + ", ".join(group))
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
    stale = [group for group in NATIVE_GROUPS if not is_current(group)]
    if not stale:
        print("compiled modules are current")
        return 0
    if importlib.util.find_spec("mypyc") is None or not _has_c_compiler():
        print("mypyc or a C compiler is missing: odradek's hot modules stay pure Python", file=sys.stderr)
        return 0
    clean(stale)  # a stale extension would shadow the new source if the build failed
    return build(stale)


if __name__ == "__main__":
    sys.exit(main())
