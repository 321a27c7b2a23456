"""Fetch the web console's front-end libraries from the npm registry at pinned versions into the
package (src/odradek/console/static/vendor/), so the console works with no internet: no CDN.

    python tools/vendor_console_assets.py           # fetch every package, write the files and MANIFEST.json
    python tools/vendor_console_assets.py --check   # fetch again and compare with what is committed

Each package is `npm pack`ed at its pinned version (npm checks the registry's integrity hash); the
files named in PACKAGES are copied with the package's licence beside them, and MANIFEST.json records
each file's package, version and SHA-256 (tests/console/test_assets.py checks the shipped files
against it). Needs `npm` (Debian's `npm`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "src" / "odradek" / "console" / "static" / "vendor"
# package -> (version, {file in the package: name in vendor/})
PACKAGES: dict[str, tuple[str, dict[str, str]]] = {
    "htmx.org": ("2.0.11", {"dist/htmx.min.js": "htmx.min.js", "LICENSE": "htmx.LICENSE"}),
    "uplot": (
        "1.6.32",
        {
            "dist/uPlot.iife.min.js": "uPlot.iife.min.js",
            "dist/uPlot.min.css": "uPlot.min.css",
            "LICENSE": "uPlot.LICENSE",
        },
    ),
}


def fetch(package: str, version: str, into: Path) -> Path:
    """The unpacked `package@version` from the npm registry."""
    subprocess.run(
        ["npm", "pack", "--silent", f"{package}@{version}"], cwd=into, check=True, capture_output=True
    )
    archive = next(into.glob("*.tgz"))
    unpacked = into / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    archive.unlink()
    return unpacked / "package"


def vendored() -> dict[str, bytes]:
    """Every vendored file's bytes, fetched now, by its name in vendor/."""
    files: dict[str, bytes] = {}
    for package, (version, wanted) in PACKAGES.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = fetch(package, version, Path(tmp))
            for inside, name in wanted.items():
                files[name] = (root / inside).read_bytes()
    return files


def manifest(files: dict[str, bytes]) -> dict[str, dict[str, str]]:
    owners = {
        name: (package, version)
        for package, (version, wanted) in PACKAGES.items()
        for name in wanted.values()
    }
    return {
        name: {
            "package": owners[name][0],
            "version": owners[name][1],
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        for name, data in sorted(files.items())
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files")
    args = parser.parse_args()
    files = vendored()
    if args.check:
        stale = [name for name, data in files.items() if (VENDOR / name).read_bytes() != data]
        print("up to date" if not stale else f"differ from npm: {', '.join(stale)}")
        return 1 if stale else 0
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (VENDOR / name).write_bytes(data)
    (VENDOR / "MANIFEST.json").write_text(json.dumps(manifest(files), indent=2) + "\n")
    print(f"wrote {len(files)} files to {VENDOR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
