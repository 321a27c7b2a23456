"""Driving the console in the browser: load a page and screenshot it, fill and submit a form; and
`odradek console` started on its own (a subprocess) for a test to browse."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from odradek.testing.broker import free_port


@contextmanager
def standalone_console(bootstrap: str) -> Iterator[str]:
    """`odradek console` on a free port against `bootstrap`: its URL once it says it serves there;
    stopped at the end, where it must exit 0."""
    port = free_port()
    argv = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap]
    argv += ["--listen", f"http://127.0.0.1:{port}"]
    console = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert console.stdout is not None
        assert f"on http://127.0.0.1:{port}" in console.stdout.readline()
        yield f"http://127.0.0.1:{port}"
    finally:
        console.terminate()
        code = console.wait(30)
        console.stdout.close()
    assert code == 0


def visit(browser: Any, screenshots: Path, url: str, name: str) -> str:
    """Load `url`, save a screenshot as `name`.png, return the page's visible text."""
    from selenium.webdriver.common.by import By

    browser.get(url)
    text = browser.find_element(By.TAG_NAME, "body").text
    snapshot(browser, screenshots, name)
    return text


def snapshot(browser: Any, screenshots: Path, name: str) -> None:
    path = screenshots / f"{name}.png"
    assert browser.save_screenshot(str(path))
    assert path.stat().st_size > 1000


def submit(browser: Any, form_selector: str, **fields: str) -> str:
    """Fill the named fields of the form at `form_selector` (a CSS selector), submit it, and return the
    visible text of the page it leads to (the form's page, reloaded after its redirect)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import Select, WebDriverWait

    form = browser.find_element(By.CSS_SELECTOR, form_selector)
    for name, value in fields.items():
        field = form.find_element(By.NAME, name)
        if field.tag_name == "select":
            Select(field).select_by_value(value)
        elif field.get_attribute("type") == "checkbox":
            if field.is_selected() != (value == "on"):
                field.click()
        else:
            field.clear()
            field.send_keys(value)
    form.submit()
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(form))
    return browser.find_element(By.TAG_NAME, "body").text
