"""A real headless browser (Debian's chromium through Selenium) and a live docsim server."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ARTIFACTS = Path(os.environ.get("DOCSIM_TEST_ARTIFACTS", "build/test-artifacts"))


def find_chromium() -> tuple[str, str] | None:
    """The chromium binary and its driver, when both are installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    """Serve `app` with uvicorn on a free local port in a thread; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def chromium(browser: str, driver: str) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield session
    finally:
        session.quit()


def console_errors(session: webdriver.Chrome) -> list[dict]:
    """Console errors and failed loads since the last call (the log is drained on read)."""
    return [entry for entry in session.get_log("browser") if entry["level"] == "SEVERE"]


@contextmanager
def required_chromium() -> Iterator[webdriver.Chrome]:
    """A headless chromium session; skips without one, or fails under DOCSIM_REQUIRE_BROWSER=1
    (as `make test` runs), so that a missing browser cannot pass for a passing test."""
    import pytest

    found = find_chromium()
    if found is None:
        message = (
            "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
        )
        if os.environ.get("DOCSIM_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    with chromium(*found) as session:
        yield session
