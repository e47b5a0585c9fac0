from collections.abc import Iterator
from typing import Any

import pytest

from seglog.harness.browser import browser


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    """One headless Chromium per test module."""
    driver = browser()
    try:
        yield driver
    finally:
        driver.quit()
