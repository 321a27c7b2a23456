"""The console's front-end libraries: the files vendored from npm are those MANIFEST.json records
(package, version, SHA-256: tools/vendor_console_assets.py), the console serves them itself (no CDN),
and its pages follow the system's dark mode."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from pathlib import Path

from odradek.console import web
from tests.console.browsing import visit
from tools.vendor_console_assets import PACKAGES

VENDOR = Path(web.__file__).resolve().parent / "static" / "vendor"


def test_the_vendored_files_are_the_pinned_npm_packages_recorded_in_the_manifest():
    manifest = json.loads((VENDOR / "MANIFEST.json").read_text())
    pinned = {
        name: (package, version) for package, (version, files) in PACKAGES.items() for name in files.values()
    }
    assert set(manifest) == set(pinned) == {p.name for p in VENDOR.iterdir()} - {"MANIFEST.json"}
    for name, entry in manifest.items():
        assert (entry["package"], entry["version"]) == pinned[name]
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == entry["sha256"], name


def test_the_console_serves_its_libraries_and_pages_load_nothing_from_elsewhere(console_broker_at):
    _, base = console_broker_at()
    with urllib.request.urlopen(base + "/", timeout=30) as page:
        html = page.read().decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/") for s in sources), sources
    htmx = next(s for s in sources if "htmx.min.js" in s)
    with urllib.request.urlopen(base + htmx, timeout=30) as served:
        assert served.read() == (VENDOR / "htmx.min.js").read_bytes()


def test_the_pages_follow_the_systems_dark_mode(console_broker_at, browser, screenshots):
    _, base = console_broker_at()
    light = _background(browser, base, screenshots, "light")
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    try:
        dark = _background(browser, base, screenshots, "dark")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert sum(light) > 600 and sum(dark) < 150, (light, dark)


def _background(browser, base: str, screenshots: Path, mode: str) -> tuple[int, ...]:
    visit(browser, screenshots, base + "/", f"cluster-{mode}")
    colour = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    return tuple(int(n) for n in re.findall(r"\d+", colour)[:3])
