"""Headless Chromium (Debian's, through its chromium-driver) for the web console's
tests and screenshots: pages, and what the page logged to its console."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def available() -> bool:
    return shutil.which("chromium") is not None and shutil.which("chromedriver") is not None


def browser(width: int = 1400, height: int = 1000) -> Any:
    """A headless Chromium whose console messages `console_errors` reads. The driver
    binary is given explicitly, so Selenium never looks for one to download."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or CHROMEDRIVER)
    return webdriver.Chrome(service=service, options=options)


def console_errors(driver: Any) -> list[str]:
    """Errors the pages logged since the last call (failed loads, script errors)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def full_page_screenshot(driver: Any, path: str) -> None:
    """The whole page, not only the window (Chromium's DevTools capture beyond the
    viewport)."""
    import base64

    width, height = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 4000), "scale": 1},
        },
    )
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


def text_when(
    driver: Any,
    css: str,
    want: Callable[[str], bool],
    timeout_s: float = 20.0,
    reload_url: str | None = None,
) -> str:
    """The text of the first element matching `css` once `want(text)` holds. The
    console's pages are live (one snapshot every viewer shares, re-rendered as it
    changes): an element may not be there yet, or be replaced between finding it and
    reading it. `reload_url`: load this page again between tries."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
    )

    deadline = time.monotonic() + timeout_s
    text = ""
    while True:
        try:
            text = driver.find_element("css selector", css).text
            if want(text):
                return text
        except (NoSuchElementException, StaleElementReferenceException):
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"{css}: {text!r} after {timeout_s} s")
        time.sleep(0.3)
        if reload_url is not None:
            driver.get(reload_url)


def attributes(driver: Any, css: str, name: str) -> list[str | None]:
    """Attribute `name` of every element matching `css`, read in the page in one step:
    a live page may replace an element between finding it and reading it from here."""
    return list(
        driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]),"
            " e => e.getAttribute(arguments[1]))",
            css,
            name,
        )
    )
