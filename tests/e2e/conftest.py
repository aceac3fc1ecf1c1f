"""The browser the dashboard tests drive: Debian's Chromium through Playwright, or a skip saying what is
missing."""

from __future__ import annotations

import pytest
from test_dashboard_browser import chromium_binary


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (/usr/bin/chromium): install Debian's chromium package")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    return binary
