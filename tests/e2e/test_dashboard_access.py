"""Who reaches the dashboard, in a real browser, as `./run.sh` starts it: this machine only, and only by its
own names (a web page that points its name at 127.0.0.1, DNS rebinding, gets no page); beyond the machine with
--listen, only a browser that gave the token.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dashboard_browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    REPO,
    free_port,
    no_exception,
    settle,
    stop,
    wait_healthy,
)

pytestmark = pytest.mark.e2e

OTHER_NAME = "rebound.example"  # a name that is not this machine's, pointed at it by the browser's resolver


@contextlib.contextmanager
def run_sh(folder: Path, *args: str, token: str | None = None) -> Iterator[str]:
    """`./run.sh ARGS` on a free port, as a user starts it; yields its base URL, stops it by its own pid."""
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("STASH_LISTEN", "STASH_DASHBOARD_TOKEN")
    }
    env.update(
        {"STASH_DB": str(folder / "results.duckdb"), **({"STASH_DASHBOARD_TOKEN": token} if token else {})}
    )
    listen = args[args.index("--listen") + 1] if "--listen" in args else "127.0.0.1"
    log_path = folder / f"run-{port}.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            ["bash", "run.sh", *args, "--server.headless", "true", "--server.port", str(port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base = f"http://{listen}:{port}"
        try:
            wait_healthy(base, server, log, log_path, 90)
            yield base
        finally:
            stop(server)


def listening_addresses(port: int) -> set[str]:
    import psutil

    return {conn.laddr.ip for conn in psutil.net_connections("tcp") if conn.laddr.port == port
            and conn.status == psutil.CONN_LISTEN}  # fmt: skip


@contextlib.contextmanager
def browser_tab(chromium: str, resolve: tuple[str, str] | None = None) -> Iterator:
    """A browser tab; with `resolve` (name, address) its resolver gives that address for that name, as a
    rebinding attacker's DNS does. The console lines it logs are in its `console` list."""
    from playwright.sync_api import sync_playwright

    rules = [f"--host-resolver-rules=MAP {resolve[0]} {resolve[1]}"] if resolve else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=[*CHROMIUM_ARGS, *rules]
        )
        tab = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        tab.set_default_timeout(30_000)
        tab.console = []
        tab.on("console", lambda message: tab.console.append(message.text))
        try:
            yield tab
        finally:
            browser.close()


def test_the_dashboard_is_private_unless_asked(chromium: str, tmp_path: Path) -> None:
    """./run.sh listens on 127.0.0.1 only; with --listen it asks for a token, and a browser without it gets no
    page (the lock message only); with it, the Overview."""
    with browser_tab(chromium) as page, run_sh(tmp_path) as base:
        assert listening_addresses(int(base.rsplit(":", 1)[1])) == {"127.0.0.1"}
        page.goto(base)
        settle(page, "Overview")
    token = "t0ken-of-this-test"
    with browser_tab(chromium) as page, run_sh(tmp_path, "--listen", "127.0.0.2", token=token) as base:
        assert listening_addresses(int(base.rsplit(":", 1)[1])) == {"127.0.0.2"}
        for url in (base, f"{base}/?token=wrong"):
            page.goto(url)
            page.get_by_text("needs its access token").wait_for()
            assert (
                page.locator("h1").count() == 0 and page.locator('[data-testid="stSidebarNav"]').count() == 0
            )
        page.goto(f"{base}/?token={token}")
        settle(page, "Overview")
        no_exception(page, "with the token")
        assert "token=" not in page.url  # taken out of the address bar once read


def test_a_name_pointed_at_this_machine_gets_no_page(chromium: str, tmp_path: Path) -> None:
    """DNS rebinding: a page the user visits points its own name at 127.0.0.1 and loads the dashboard as its
    own; the Host it sends is its name, so the WebSocket is refused (no page, no Run page to start code).
    127.0.0.1 and localhost still open it."""
    with run_sh(tmp_path) as base, browser_tab(chromium, (OTHER_NAME, "127.0.0.1")) as tab:
        port = base.rsplit(":", 1)[1]
        for url in (base, f"http://localhost:{port}"):
            tab.goto(url)
            settle(tab, "Overview")
        tab.goto(f"http://{OTHER_NAME}:{port}")
        tab.wait_for_timeout(6000)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "rebound_name.png"))
        assert tab.locator("h1").count() == 0 and tab.locator('[data-testid="stSidebarNav"]').count() == 0
        assert any("WebSocket" in line and "403" in line for line in tab.console), tab.console


def test_with_listen_any_name_of_the_machine_reaches_the_token_check(chromium: str, tmp_path: Path) -> None:
    """--listen serves the machine by whatever name it has: the token, not the name, guards it there."""
    token = "t0ken-of-this-test"
    with (
        run_sh(tmp_path, "--listen", "127.0.0.2", token=token) as base,
        browser_tab(chromium, (OTHER_NAME, "127.0.0.2")) as tab,
    ):
        port = base.rsplit(":", 1)[1]
        tab.goto(f"http://{OTHER_NAME}:{port}")
        tab.get_by_text("needs its access token").wait_for()
        tab.goto(f"http://{OTHER_NAME}:{port}/?token={token}")
        settle(tab, "Overview")
        no_exception(tab, "by another name, with the token")


REFUSE_COOKIES = "Object.defineProperty(document, 'cookie', {get: () => '', set: () => {}})"


def test_a_browser_that_gave_the_token_keeps_its_admission_and_no_history_entry_holds_it(
    chromium: str, tmp_path: Path
) -> None:
    """The token in the URL: the page reopens without it (Back does not show it: Streamlit had pushed the
    address without it as a new entry), and a reload, another tab or a page opened later need no token (a
    reload locked the user out, against a Run page's run that 'survives a page reload'). Given in the lock
    page's field instead, no address holds it at all. A browser that refuses cookies keeps it for the open
    page only, the address without it."""
    token = "t0ken-of-this-test"
    with run_sh(tmp_path, "--listen", "127.0.0.2", token=token) as base:
        with browser_tab(chromium) as tab:
            tab.goto(f"{base}/run?token={token}")
            settle(tab, "Run a profile")
            assert tab.url == f"{base}/run"
            (kept,) = [
                cookie for cookie in tab.context.cookies() if cookie["name"].startswith("stash_admission")
            ]
            assert token not in kept["value"] and kept["sameSite"] == "Strict", kept
            tab.reload()
            settle(tab, "Run a profile")
            other = tab.context.new_page()
            other.goto(base)
            settle(other, "Overview")
            tab.go_back()
            tab.wait_for_timeout(1000)
            assert "token=" not in tab.url, tab.url
        with browser_tab(chromium) as tab:
            tab.goto(base)
            tab.get_by_text("needs its access token").wait_for()
            tab.locator('input[type="password"]').fill(token)
            tab.keyboard.press("Enter")
            settle(tab, "Overview")
            tab.reload()
            settle(tab, "Overview")
        with browser_tab(chromium) as tab:
            tab.context.add_init_script(REFUSE_COOKIES)
            tab.goto(f"{base}/run?token={token}")
            settle(tab, "Run a profile")
            assert tab.url == f"{base}/run"
            tab.reload()
            tab.get_by_text("needs its access token").wait_for()
