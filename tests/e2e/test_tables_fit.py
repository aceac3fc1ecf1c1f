"""Every dashboard table is readable in a 1280 x 800 window: with the shipped example results loaded, each
page (and each table it opens) is drawn in a real browser, and no table is wider than the space it is given
(a data frame's grid scrolls sideways only when its columns are wider than its box; a static table likewise).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dashboard_browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    free_port,
    no_exception,
    settle,
    shot,
    stop,
    wait_healthy,
)

from stash_core.store import examples

REPO = Path(__file__).resolve().parents[2]
WINDOW = {"width": 1280, "height": 800}

pytestmark = pytest.mark.e2e

# Each table's box and how wide its content is: a grid's scroller (Glide data grid) or a static table.
OVERFLOW_JS = """
() => [...document.querySelectorAll('[data-testid="stDataFrame"], [data-testid="stTable"]')]
  .filter(box => box.checkVisibility())
  .map(box => {
    const inner = box.querySelector('.dvn-scroller') || box.querySelector('table')?.parentElement || box;
    const heads = [...box.querySelectorAll('th, [role="columnheader"]')].map(h => h.innerText.trim());
    return {scroll: inner.scrollWidth, client: inner.clientWidth, box: box.clientWidth,
            headings: heads.slice(0, 12).join(' | '),
            within: [...Array(6).keys()].reduce((acc, _) => [acc[0]?.parentElement?.closest('[data-testid]'),
              [...acc[1], acc[0]?.parentElement?.closest('[data-testid]')?.dataset.testid]], [box, []])[1]
              .join(' < ')};
  })
"""


@pytest.fixture(scope="module")
def examples_dashboard(tmp_path_factory: pytest.TempPathFactory, chromium: str) -> Iterator[str]:
    """A dashboard on a database holding the shipped example results; its base URL."""
    folder = tmp_path_factory.mktemp("tables")
    db = folder / "results.duckdb"
    assert examples.import_examples(db)
    port = free_port()
    env = {**os.environ, "STASH_DB": str(db), "PYTHONPATH": str(REPO)}
    log_path = folder / "streamlit.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
             "false"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, server, log, log_path, 60)
            yield base
        finally:
            stop(server)


@pytest.fixture()
def small_tab(chromium: str) -> Iterator:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport=WINDOW)
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        try:
            yield tab
        finally:
            context.close()
            browser.close()


def clipped(tab, where: str) -> list[str]:
    """The tables on the page now that are wider than their box, described."""
    tab.wait_for_timeout(600)  # the grid sizes its columns after it is drawn
    for _ in range(8):  # a table still being laid out: measure again once it has settled
        if not any(_unsettled(table) for table in tab.evaluate(OVERFLOW_JS)):
            break
        tab.wait_for_timeout(1500)
    tables = tab.locator('[data-testid="stDataFrame"] >> visible=true')
    for index in range(tables.count()):  # each table as drawn, to look at
        name = re.sub(r"\W+", "_", where.lower()).strip("_")
        tables.nth(index).screenshot(path=str(ARTIFACTS / f"table_{name}_{index}.png"))
    return [
        f"{where}: {table['scroll']} px of columns in {table['client']} px ({table['headings']}; "
        f"in {table['within']})"
        for table in tab.evaluate(OVERFLOW_JS)
        if table["scroll"] > table["client"] + 1 and table["headings"]  # one not drawn yet has no headings
    ]


def _unsettled(table: dict) -> bool:
    """Wider than its box, or not drawn yet (a grid without headings, as a busy machine leaves it a while)."""
    return table["scroll"] > table["client"] + 1 or not table["headings"]


def open_page(tab, nav, name: str, title: str | None = None) -> None:
    nav.get_by_text(name, exact=True).first.click()
    settle(tab, title or name)


def press(tab, button: str, answer: str) -> None:
    tab.get_by_role("button", name=re.compile(rf"{button}$")).first.click()
    tab.locator(f"{answer} >> visible=true").first.wait_for(timeout=120_000)
    settle(tab)


def test_no_table_is_clipped_at_1280_px(examples_dashboard: str, small_tab) -> None:
    tab = small_tab
    tab.goto(examples_dashboard)
    settle(tab, "Overview")
    nav = tab.locator('[data-testid="stSidebarNav"]')
    found = clipped(tab, "Overview")

    open_page(tab, nav, "Stall breakdown")
    tab.get_by_text("Table of these runs").first.click()
    tab.locator('[data-testid="stDataFrame"] >> visible=true').first.wait_for()
    found += clipped(tab, "Stall breakdown, table of runs")
    for section in ("Stalls", "Phases"):
        tab.get_by_text(section, exact=True).first.click()
        settle(tab, "Stall breakdown")
        found += clipped(tab, f"Stall breakdown, {section}")

    for name, title in (
        ("Compare instances", None),
        ("Models", None),
        ("Upload", None),
        ("Run", "Run a profile"),
    ):
        open_page(tab, nav, name, title)
        found += clipped(tab, name)
        if name == "Upload":  # the preview of the shipped example files
            files = [str(path) for path in examples.example_result_files()]
            tab.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(files)
            tab.locator('[data-testid="stDataFrame"] >> visible=true').first.wait_for()
            settle(tab, "Upload")
            found += clipped(tab, "Upload, preview")
    for name, button, answer in (
        ("Recommend", "Recommend", '[data-testid="stDataFrame"]'),
        ("Schedule", "Simulate", '[data-testid="stVegaLiteChart"]'),
        ("Spot", "Plan", '[data-testid="stMetricValue"]'),
    ):
        open_page(tab, nav, name)
        found += clipped(tab, name)
        if name == "Recommend":  # the editable instance catalog
            tab.get_by_text("Instance catalog: shapes and prices (editable)").first.click()
            tab.locator('[data-testid="stDataFrame"] >> visible=true').first.wait_for()
            found += clipped(tab, "Recommend, instance catalog, shapes")
            for group in ("Links", "Prices"):
                tab.get_by_text(group, exact=True).first.click()
                settle(tab, "Recommend")
                found += clipped(tab, f"Recommend, instance catalog, {group.lower()}")
        press(tab, button, answer)
        no_exception(tab, name)
        found += clipped(tab, f"{name} after {button}")
        shot(tab, f"narrow_{name.lower()}")
    assert not found, "\n".join(found)
