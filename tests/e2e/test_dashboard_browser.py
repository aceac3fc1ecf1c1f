"""The dashboard in a real browser: `streamlit run app.py` on a free port, driven by Playwright with the
system Chromium. Visits every page through the navigation, uploads a result file, runs a query, and checks
that no exception box appears anywhere. Screenshots go to test-artifacts/e2e/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from result_docs import populate_dashboard_db, result_doc, run_count

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

ARTIFACTS = REPO / "test-artifacts" / "e2e"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
OWN_PAGES = ["Overview", "Run", "Stall breakdown", "Compare instances", "Upload", "SQL"]
EXCEPTION_BOX = '[data-testid="stException"]'


def chromium_binary() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def browser_binary() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip(
            "no Chromium binary (/usr/bin/chromium): install Debian's chromium package (scripts/setup.sh)"
        )
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    return binary


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, browser_binary: str) -> Iterator[tuple[str, Path]]:
    """A running dashboard on a prepared database: (base URL, database path)."""
    folder = tmp_path_factory.mktemp("e2e")
    db = folder / "results.duckdb"
    populate_dashboard_db(db)
    port = free_port()
    env = {**os.environ, "STASH_DB": str(db), "PYTHONPATH": str(REPO)}
    log = open(folder / "streamlit.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
         str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, server, log, folder / "streamlit.log", 60)
        yield base, db
    finally:
        stop(server)
        log.close()


def wait_healthy(base: str, server: subprocess.Popen, log, log_path: Path, timeout_s: float) -> None:
    """Until the dashboard at `base` answers its health check; AssertionError with its log if it dies first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            log.flush()
            raise AssertionError(f"streamlit did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.3)


def stop(server: subprocess.Popen) -> None:
    """Stop a server we started, by its own pid (it leads its own session)."""
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@pytest.fixture()
def page(browser_binary: str) -> Iterator:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=browser_binary, args=CHROMIUM_ARGS, headless=True
        )
        context = browser.new_context(viewport={"width": 1440, "height": 1800})
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        try:
            yield tab
        finally:
            context.close()
            browser.close()


def settle(tab, title: str | None = None) -> None:
    """Wait until the page shows its title (`title` when given) and its script run has finished."""
    headings = tab.locator("h1")
    (headings.filter(has_text=title) if title else headings).first.wait_for()
    tab.wait_for_timeout(300)
    # While a script runs, Streamlit shows a "running" status widget; it goes away when the run ends.
    tab.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=30_000)
    tab.wait_for_timeout(400)


def no_exception(tab, where: str) -> None:
    boxes = tab.locator(EXCEPTION_BOX)
    assert boxes.count() == 0, f"{where}: {boxes.first.inner_text()[:500]}"


def shot(tab, name: str) -> None:
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_every_page_upload_and_query_in_a_real_browser(
    dashboard: tuple[str, Path], page, tmp_path: Path
) -> None:
    base, db = dashboard
    tab = page
    tab.goto(base)
    settle(tab, "Overview")
    nav = tab.locator('[data-testid="stSidebarNav"]')
    names = [link.inner_text().strip().splitlines()[-1] for link in nav.locator("a").all()]  # after the icon
    assert set(OWN_PAGES) <= set(names), names  # other pages (Models, Recommend) are visited as well
    titles = {"Run": "Run a profile"}
    for name in names:
        nav.get_by_text(name, exact=True).first.click()
        settle(tab, titles.get(name, name if name in OWN_PAGES else None))
        if name in ("Overview", "Stall breakdown", "Compare instances"):
            tab.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
            tab.wait_for_timeout(500)
        no_exception(tab, name)
        shot(tab, name.lower().replace(" ", "_"))
        if name == "Stall breakdown":
            breakdown_details(tab)

    # Upload: a good result file is checked, previewed and stored.
    result = tmp_path / "uploaded.json"
    doc = result_doc("mobilenet_v2", run_id="20261122T130000Z-abcd1234", samples=True, telemetry=True, seed=9)
    result.write_text(json.dumps(doc))
    nav.get_by_text("Upload", exact=True).first.click()
    settle(tab, "Upload")
    tab.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(result))
    tab.get_by_text("uploaded.json — completed run of mobilenet_v2").wait_for()
    settle(tab, "Upload")
    no_exception(tab, "Upload after a file")
    shot(tab, "upload_checked")
    tab.get_by_role("button", name="Store 1 new run(s) in the database").click()
    tab.get_by_text("Stored 1 run(s) from 1 file(s).").wait_for()
    assert run_count(db) == 6

    # SQL: a SELECT shows rows; DROP TABLE is refused.
    nav.get_by_text("SQL", exact=True).first.click()
    settle(tab, "SQL")
    editor = tab.locator('[data-testid="stTextArea"] textarea').first
    editor.fill("SELECT model, count(*) AS runs FROM runs GROUP BY model ORDER BY model")
    tab.get_by_role("button", name="Run query").click()
    tab.get_by_text(re.compile(r"\d rows? in \d+ ms")).wait_for()
    settle(tab, "SQL")
    no_exception(tab, "SQL select")
    # The rows' caption may reach the browser before the table beside it: wait for the table itself.
    tab.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert tab.locator('[data-testid="stDataFrame"]').count() >= 1
    shot(tab, "sql_select")
    editor.fill("DROP TABLE runs")
    tab.get_by_role("button", name="Run query").click()
    tab.get_by_text("DROP statements are refused").wait_for()
    no_exception(tab, "SQL drop")
    assert run_count(db) == 6

    # Back to the overview: the uploaded run counts.
    nav.get_by_text("Overview", exact=True).first.click()
    settle(tab, "Overview")
    assert tab.locator('[data-testid="stMetricValue"]').first.inner_text().strip() == "6"
    no_exception(tab, "Overview after upload")
    # The SQL page still holds the query typed there before (a widget's value outlives its page).
    nav.get_by_text("SQL", exact=True).first.click()
    settle(tab, "SQL")
    assert tab.locator('[data-testid="stTextArea"] textarea').first.input_value() == "DROP TABLE runs"
    # The server's log holds no file-watcher (inotify) or Streamlit info lines (.streamlit/config.toml).
    log = (db.parent / "streamlit.log").read_text()
    assert "inotify" not in log and "does not exist anymore" not in log, log[-2000:]


def breakdown_details(tab) -> None:
    """The Stall breakdown page's table of runs and its telemetry section draw without an exception."""
    tab.get_by_text("Table of these runs").first.click()
    tab.locator('[data-testid="stDataFrame"] >> visible=true').first.wait_for()
    tab.get_by_text("Telemetry", exact=True).first.click()
    settle(tab, "Stall breakdown")
    tab.get_by_text("a band is one stretch of a run", exact=False).or_(
        tab.get_by_text("each run's first launch, the runs laid end to end", exact=False)
    ).first.wait_for()
    tab.locator('[data-testid="stVegaLiteChart"] >> visible=true').nth(1).wait_for()
    no_exception(tab, "Stall breakdown telemetry")
    shot(tab, "stall_breakdown_telemetry")


def test_the_decision_pages_answer_in_a_real_browser(dashboard: tuple[str, Path], page) -> None:
    """Recommend, Schedule and Spot with their defaults: each button gives an answer, no exception box; and
    no request leaves the dashboard's own address (the tab's icon was fetched from fonts.gstatic.com)."""
    base, _ = dashboard
    tab = page
    elsewhere: list[str] = []
    tab.on("request", lambda request: None if request.url.startswith((base, "data:", "blob:")) else
           elsewhere.append(request.url))  # fmt: skip
    tab.goto(base)
    settle(tab, "Overview")
    nav = tab.locator('[data-testid="stSidebarNav"]')
    for name, button, answer in [
        ("Recommend", "Recommend", '[data-testid="stDataFrame"]'),
        ("Schedule", "Simulate", '[data-testid="stVegaLiteChart"]'),
        ("Spot", "Plan", '[data-testid="stMetricValue"]'),
    ]:
        nav.get_by_text(name, exact=True).first.click()
        settle(tab, name)
        # the button's name ends with its label (a material icon's name comes first)
        tab.get_by_role("button", name=re.compile(rf"{button}$")).first.click()
        tab.locator(f"{answer} >> visible=true").first.wait_for(timeout=120_000)
        settle(tab, name)
        no_exception(tab, f"{name} after {button}")
        shot(tab, f"{name.lower()}_answer")
    assert not elsewhere, elsewhere


def test_text_from_a_link_is_shown_as_text_in_a_real_browser(dashboard: tuple[str, Path], page) -> None:
    """A ?run= of Markdown, a colour directive, LaTeX, HTML and addresses: the warning shows those characters,
    and the browser made no link, bold, colour, formula or element of them (views.common.plain). A web or
    e-mail address was linked in the rendered text, past every escape."""
    base, _ = dashboard
    hostile = (
        "**bold** [click](javascript:alert(1)) :red[x] $x^2$ <b>tag</b> [l](http://e.com) www.e.com a@b.com"
    )
    tab = page
    tab.goto(f"{base}/breakdown?run={urllib.parse.quote(hostile)}")
    settle(tab, "Stall breakdown")
    box = tab.locator('[data-testid="stAlert"]').filter(has_text="No run").first
    assert hostile in box.inner_text().replace("\u2060", ""), box.inner_text()
    made = box.evaluate("e => [...e.querySelectorAll('a, strong, b, .katex, span[style*=color]')].length")
    assert made == 0, box.inner_html()[:1000]
    no_exception(tab, "Stall breakdown with a hostile ?run=")


def test_a_number_typed_on_the_run_page_is_taken_as_typed_in_a_real_browser(
    dashboard: tuple[str, Path], page
) -> None:
    """The page read 2.5 in the batch size as 2 and the browser 1e12 in the time limit as 1, and Start
    launched a profile with a value nobody typed; now each is refused on Start by its field's rule."""
    from stash_core.engine import jobs

    base, db = dashboard
    tab = page
    tab.goto(f"{base}/run")
    settle(tab, "Run a profile")
    try:
        for label, typed, said in [
            ("Batch size (per worker)", "2.5", "Batch size (per worker) must be a whole number"),
            ("Time limit per phase (s)", "1e12", "Time limit per phase (s): must be at most"),
        ]:
            field = tab.get_by_label(label, exact=True)
            field.fill(typed)
            field.press("Tab")
            settle(tab)
            assert float(field.input_value()) == float(typed)  # as typed, if written out in full
            # a profile of another test tier measuring beside this one disables Start until confirmed, as
            # the page asks of anyone starting a second measurement
            anyway = tab.get_by_text("Start anyway", exact=True)
            if anyway.count() and not tab.get_by_role("checkbox", name="Start anyway").is_checked():
                anyway.first.click()
                settle(tab)
            tab.get_by_role("button", name=re.compile(r"Start profile$")).click()
            settle(tab)
            alerts = tab.locator('[data-testid="stAlert"]')
            assert alerts.filter(has_text=said).count() == 1, alerts.all_inner_texts()
            field.fill("300" if "Time" in label else "8")  # a sound value again for the next field
            field.press("Tab")
            settle(tab)
        no_exception(tab, "Run page after odd numbers")
    finally:  # a profile started by mistake is stopped by its own process ids
        for job in jobs.list_jobs(db):
            jobs.cancel_job(db, job.job_id)
