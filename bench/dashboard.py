"""Server-side time of each dashboard page's script run on a large database.

    python bench/make_big_db.py /tmp/big.duckdb          # 10,000 runs, 10 million iteration rows
    python bench/dashboard.py /tmp/big.duckdb [--repeat 3]

Each page runs in Streamlit's AppTest (the same script runner the server uses, without a browser). Printed per
page: the page script's own run time with an empty query cache ("cold": every query goes to DuckDB) and with a
warm cache (a rerun within the cache TTL), and AppTest's wall time of the cold run. Goal: under 1 s cold.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from bench_args import bench_parser, positive_int

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stash_core.errors import StashError, first_line  # noqa: E402

PAGES = {
    "Overview": "pages/overview.py",
    "Run": "pages/run.py",
    "Campaign": "pages/campaign.py",
    "Stall breakdown": "pages/breakdown.py",
    "Compare instances": "pages/compare.py",
    "Models": "pages/models.py",
    "Recommend": "pages/recommend.py",
    "Schedule": "pages/schedule.py",
    "Spot": "pages/spot.py",
    "Upload": "pages/upload.py",
    "SQL": "pages/sql.py",
}  # every page of app.py's navigation (tests/test_bench_args.py checks)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("db", type=Path)
    parser.add_argument(
        "--repeat", type=positive_int, default=3, help="cold and warm runs per page (median reported)"
    )
    args = parser.parse_args()
    if not args.db.is_file():
        raise SystemExit(f"{args.db}: no such database; make one with bench/make_big_db.py")
    os.environ["STASH_DB"] = str(args.db.resolve())
    os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

    import streamlit as st
    from streamlit.navigation import page as page_module
    from streamlit.testing.v1 import AppTest

    from stash_core import store

    # Time the page script itself (StreamlitPage.run executes the page file in the script thread).
    script_times: list[float] = []
    original_run = page_module.StreamlitPage.run

    def timed_run(self):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original_run(self)
        finally:
            script_times.append(time.perf_counter() - start)

    page_module.StreamlitPage.run = timed_run  # type: ignore[method-assign]

    summary = store.database_summary(args.db)
    print(f"database {args.db}: {summary['runs']:,} runs, {summary['iterations']:,} iteration rows, "
          f"{args.db.stat().st_size / 1e6:.0f} MB")  # fmt: skip
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    app.run()  # imports and first-run costs are not part of any page's figure
    print(f"{'page':<34}{'cold script s':>15}{'warm script s':>15}{'cold wall s':>13}  problems")

    def measure(title: str) -> None:
        cold, warm, wall = [], [], []
        for _ in range(args.repeat):
            st.cache_data.clear()
            script_times.clear()
            start = time.perf_counter()
            app.run()
            wall.append(time.perf_counter() - start)
            cold.append(script_times[-1])
            script_times.clear()
            app.run()
            warm.append(script_times[-1])
        problems = [e.value for e in app.exception] + [e.value for e in app.error]
        print(f"{title:<34}{statistics.median(cold):>15.3f}{statistics.median(warm):>15.3f}"
              f"{statistics.median(wall):>13.3f}  {'; '.join(map(str, problems))[:80] or '-'}")  # fmt: skip

    for title, path in PAGES.items():
        app.switch_page(path).run()  # warm-up: imports of the page's modules
        measure(title)
        if path == PAGES["Stall breakdown"]:
            # The run detail draws one section at a time; the chart-heavy ones are timed too.
            for section in ("Iteration times", "Telemetry"):
                app.button_group(key="bd-section").set_value(section).run()
                measure(f"{title} · {section.lower()}")
            app.button_group(key="bd-section").set_value("Stalls").run()


if __name__ == "__main__":
    try:
        main()
    except StashError as error:  # a file that is not a Stash database (UsageError): one line, no traceback
        print(f"dashboard.py: {first_line(error)}", file=sys.stderr)
        sys.exit(2)
