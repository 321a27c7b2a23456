"""Driving the console in the browser: load a page and screenshot it, fill and submit a form; and
`odradek console` started on its own (a subprocess) for a test to browse."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from odradek.testing.broker import free_port

NODE_GONE = "does not belong to the document"  # Chrome's words for a node of a replaced document
STALE_READS = 20


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

    browser.get(url)
    text = page_text(browser)
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
    WebDriverWait(browser, 30).until(lambda _: replaced(form))
    return page_text(browser)


def replaced(element: Any) -> bool:
    """Whether `element`'s document has gone: Selenium says the element is stale, or Chrome says the node
    "does not belong to the document" (it says so while the old document is still being torn down)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if NODE_GONE not in str(exc):
            raise
        return True
    return False


def page_text(browser: Any) -> str:
    """The visible text of the page once its document has loaded. Chrome may replace the document
    between finding its body and reading it (the old page's last script still running as the next
    one commits): Chrome then says the node "does not belong to the document", and the text is read
    again from the document now shown."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for _ in range(STALE_READS):
        WebDriverWait(browser, 30).until(
            lambda b: b.execute_script("return document.readyState") == "complete"
        )
        try:
            return browser.find_element(By.TAG_NAME, "body").text
        except StaleElementReferenceException:
            pass
        except WebDriverException as exc:
            if NODE_GONE not in str(exc):
                raise
        time.sleep(0.1)
    raise AssertionError(f"the page's document was replaced {STALE_READS} times while its text was read")
