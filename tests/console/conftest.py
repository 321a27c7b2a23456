"""The console tests' shared parts: a headless Chromium driven by Selenium (Debian's chromium and
chromium-driver; `browser`, one per test module), where screenshots go (`screenshots`: the directory
SCREENSHOTS_ENV names, to keep them, else a temporary one), and `console_broker_at`, which starts a
broker process serving the console on a free port with the given overrides."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess, free_port

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SCREENSHOTS_ENV = "ODRADEK_CONSOLE_SCREENSHOTS"
ConsoleBroker = tuple[BrokerProcess, str]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A browser test (one using `browser`) needs Debian's chromium and chromium-driver."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        missing = pytest.mark.skip(reason="needs Debian's chromium and chromium-driver")
        for item in items:
            if "browser" in getattr(item, "fixturenames", ()):
                item.add_marker(missing)


@contextmanager
def chromium(*flags: str) -> Iterator[object]:
    """A headless Chromium under Selenium, with `flags` besides the usual ones."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        *flags,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get(SCREENSHOTS_ENV)
    directory = Path(kept) if kept else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="module")
def console_broker_at(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ConsoleBroker]]:
    """`start(**overrides)`: a broker process with `http.listeners` on a free port (and the
    overrides), and the console's base URL; stopped at the end of the module. Several may start at
    once from threads."""
    lock = threading.Lock()  # mktemp is not thread-safe (its first call makes the base directory)
    with ExitStack() as stack:

        def start(**overrides: str) -> ConsoleBroker:
            with lock:
                root = tmp_path_factory.mktemp("console")
            port = free_port()
            configs = {"http.listeners": f"http://127.0.0.1:{port}", **overrides}
            process = BrokerProcess(root / "data", output_path=root / "broker.out", overrides=configs)
            stack.enter_context(process)
            scheme = "https" if configs["http.listeners"].startswith("https") else "http"
            return process, f"{scheme}://127.0.0.1:{port}"

        yield start
