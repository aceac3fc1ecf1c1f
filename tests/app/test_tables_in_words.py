"""Dashboard tables and answers read as words: the Stalls table closes at the iteration time with its
"Not separated" row, every table's headings are words with units (no `mean_s`), ties are said as ties, a
fragile spot plan names what moved, and the Recommend chart colours what meets the constraints."""

from __future__ import annotations

import json
import re
from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store
from stash_core.views.labels import column_label

SNAKE_NAME = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")


def open_run(run_id: str) -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["run"] = run_id
    app.run()
    app.switch_page("pages/breakdown.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def headings(element) -> list[str]:
    """The headings a shown st.dataframe gives its columns: the column config's label, else the name."""
    config = json.loads(element.proto.columns or "{}")
    return [(config.get(str(name)) or {}).get("label") or str(name) for name in element.value.columns]


def test_the_stalls_table_shows_not_separated_when_the_stalls_add_up(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.30, "interconnect": 0.08})  # adds up to t2: a remainder of 0
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    table = next(frame.value for frame in app.dataframe if "Stall" in frame.value.columns)
    row = table[table["Stall"] == "Not separated"]
    assert len(row) == 1, list(table["Stall"])
    assert row["Per iteration"].iloc[0] == "0 s" and row["Status"].iloc[0] == "nothing left over"
    assert row["Per epoch"].iloc[0] == "0 s"  # not "0 µs ± 0 µs"


def test_every_table_on_the_breakdown_page_has_headings_in_words(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.30, "interconnect": 0.08}, samples=True)
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    app.button_group(key="bd-section").set_value("Phases").run()
    assert not app.exception
    shown = {name: heading for frame in app.dataframe for name, heading in zip(frame.value.columns,
             headings(frame), strict=True)}  # fmt: skip
    assert shown["mean_s"] == "mean (s)" and shown["ci95_s"] == "± 95% (s)"
    assert shown["compute_s"] == "Compute" and shown["unattributed_s"] == "Not separated"  # "205 ms ± 4 ms"
    raw = sorted(heading for heading in shown.values() if SNAKE_NAME.match(heading))
    assert not raw, raw


def test_headings_say_their_units() -> None:
    assert column_label("compute_share") == "compute (share)"
    assert column_label("usd_per_h") == "USD per hour"
    assert column_label("cpu_util_pct") == "CPU use (%)"
    assert column_label("p95_s") == "p95 (s)"
    assert column_label("makespan (h)") == "makespan (h)"  # already in words
    assert column_label("Stall") == "Stall"


def _simulation(values: list[tuple[str, float, float]]) -> dict:
    return {
        "policies": [
            {
                "policy": name,
                "settings": {"label": name},
                "metrics": {
                    "makespan_s": makespan,
                    "avg_jct_s": makespan,
                    "p95_jct_s": makespan,
                    "avg_queue_s": makespan,
                    "comm_overhead_s": overhead,
                },
            }  # fmt: skip
            for name, makespan, overhead in values
        ]
    }


def test_times_within_rounding_are_a_tie_not_a_percentage() -> None:
    from stash_core.views.schedule import winners

    lines = winners(_simulation([("consolidate", 36_000.0, 10.0), ("fifo", 40_000.0, 11.4)]))
    overhead = next(line for line in lines if line.startswith("communication overhead"))
    assert "consolidate, fifo tied" in overhead and "% below" not in overhead and "0.00 h" not in overhead
    makespan = next(line for line in lines if line.startswith("makespan"))
    assert makespan == "makespan: consolidate (10.0 h), 10.0% below fifo (11.1 h)"


def test_a_fragile_spot_plan_says_which_coefficient_moved(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "fresh.duckdb"
    monkeypatch.setenv("STASH_DB", str(db))
    app = AppTest.from_file(str(REPO / "pages" / "spot.py"), default_timeout=60)
    app.session_state["stash_db_path"] = str(db)
    app = app.run().button(key="spot-plan").click().run()
    assert not app.exception
    fragile = next(w.value for w in app.warning if "Fragile plan" in w.value)
    assert (
        "g3 +5%" not in fragile and "the loss model's loss-scale constant g3 is 5% higher or lower" in fragile
    )


def test_the_recommend_chart_colours_what_meets_the_constraints(tmp_path: Path, monkeypatch) -> None:
    priced = tmp_path / "rec.duckdb"
    monkeypatch.setenv("STASH_DB", str(priced))
    app = AppTest.from_file(str(REPO / "pages" / "recommend.py"), default_timeout=120)
    app.session_state["stash_db_path"] = str(priced)
    app = app.run()
    app.number_input(key="rec-budget").set_value(24.0)
    app.multiselect(key="rec-inst").set_value(["p3.2xlarge", "p3.8xlarge", "g4dn.xlarge"])
    app = next(button for button in app.button if button.label == "Recommend").click().run()
    assert not app.exception
    spec = next(json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")
                if "training_usd" in chart.proto.spec)  # fmt: skip
    colour = [layer["encoding"]["color"] for layer in spec["layer"] if "color" in layer.get("encoding", {})]
    scales = [encoding["scale"] for encoding in colour if encoding.get("field") == "kind"]
    assert scales, spec["layer"]
    colours = dict(zip(scales[0]["domain"], scales[0]["range"], strict=True))
    assert colours["meets the constraints"] != "#bab0ac" and colours["does not meet them"] == "#bab0ac"


def test_a_catalog_edit_of_one_group_of_columns_keeps_the_others(tmp_path: Path) -> None:
    from stash_core import views

    db = tmp_path / "catalog.duckdb"
    before = views.recommend.instance_catalog(db)
    prices = before[views.recommend.CATALOG_GROUPS["Prices"]].copy()
    first = prices.index[0]
    prices.loc[first, "on_demand_usd_per_h"] = 99.0
    after = views.recommend.with_catalog_edits(before, prices)
    assert after.loc[first, "on_demand_usd_per_h"] == 99.0
    assert (
        after.drop(columns="on_demand_usd_per_h")
        .astype(str)
        .equals(before.drop(columns="on_demand_usd_per_h").astype(str))
    )
    edited, added, _ = views.recommend.save_catalog_edits(db, before, after)
    assert edited == [before.loc[first, "name"]] and added == []


def test_no_page_shows_a_stored_column_name_as_a_heading(populated_db: Path) -> None:
    from stash_core.store import examples

    examples.import_examples(populated_db)
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    shown = {}
    pages = [("overview", None), ("breakdown", None), ("compare", None), ("models", None),
             ("recommend", "Recommend"), ("schedule", "Simulate"), ("spot", "Plan")]  # fmt: skip
    for page, button in pages:
        app.switch_page(f"pages/{page}.py").run()
        if button:
            next(b for b in app.button if b.label == button).click().run()
        assert not app.exception, (page, [e.value for e in app.exception])
        shown[page] = [heading for frame in app.dataframe for heading in headings(frame)]
    raw = {page: [h for h in found if SNAKE_NAME.match(h)] for page, found in shown.items()}
    assert all(shown.values()) and not any(raw.values()), raw
