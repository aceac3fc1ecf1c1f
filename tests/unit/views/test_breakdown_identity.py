"""The stacked bars of every page close at the iteration time: named stalls + remainder = t2 (or 100%).

Over hundreds of noisy result documents (noisy_docs.noisy_result_doc), current and written before the
remainder existed, as stall_breakdown rows; then a few through a real store; and the page helpers' wording
for stalls that were not resolved.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from noisy_docs import noisy_result_doc

from stash_core import store, views
from stash_core.analysis.stalls import REMAINDER, STALLS, remainder_of
from stash_core.views.stall_frames import stall_detail_rows, stall_download_frame, with_remainder_columns

SEEDS = range(300)
MEASURES = ("seconds", "epoch_s", "share")


def view_row(doc: dict, remainder_interval: bool) -> dict:
    """The stall_breakdown row of a document, pivoted as the view does (with the remainder interval when the
    store gives it)."""
    result = doc["breakdown"]
    row = {
        key: result.get(key) for key in ("iteration_s", "iteration_ci95_s", "epoch_s", "iterations_per_epoch")
    }
    row.update(run_id=doc["run_id"], run_label=doc["run_id"])
    for stall in STALLS:
        entry = result["stalls"][stall]
        seconds = entry["seconds"]
        row[f"{stall}_s"], row[f"{stall}_ci95_s"] = seconds, entry["ci95_s"]
        row[f"{stall}_share"] = None if seconds is None else entry["share"]
        row[f"{stall}_epoch_s"], row[f"{stall}_status"] = entry["epoch_s"], entry["status"]
    if remainder_interval:
        row["unattributed_ci95_s"] = result["unattributed_ci95_s"]
    return row


@pytest.fixture(scope="module", params=[False, True], ids=["current", "legacy"])
def runs(request: pytest.FixtureRequest) -> tuple[list[dict], pd.DataFrame]:
    docs = [noisy_result_doc(seed, legacy=request.param) for seed in SEEDS]
    return docs, pd.DataFrame([view_row(doc, remainder_interval=not request.param) for doc in docs])


def totals(doc: dict) -> dict[str, float]:
    result = doc["breakdown"]
    return {"seconds": result["iteration_s"], "share": 1.0, "epoch_s": result["epoch_s"]}


@pytest.mark.parametrize("measure", MEASURES)
def test_every_bar_closes_at_the_runs_total(runs: tuple[list[dict], pd.DataFrame], measure: str) -> None:
    docs, frame = runs
    bars = views.breakdown.stall_long_frame(frame, measure)
    by_run: dict[str, list[dict]] = {}  # each run's bars in the frame's order (one pass, as plain rows)
    for bar in bars.to_dict("records"):
        by_run.setdefault(bar["run_id"], []).append(bar)
    assert set(by_run) == {doc["run_id"] for doc in docs}
    negative_remainders = 0
    for doc in docs:
        mine = by_run[doc["run_id"]]
        total = totals(doc)[measure]
        assert mine[-1]["bar_end"] == pytest.approx(total, rel=1e-12)
        assert math.fsum(bar["value"] for bar in mine) == pytest.approx(total, rel=1e-9)
        assert [bar["bar_start"] for bar in mine[1:]] == [bar["bar_end"] for bar in mine[:-1]]  # end to end
        assert mine[0]["bar_start"] == 0.0
        remainder = remainder_of(doc["breakdown"])
        remainders = [bar for bar in mine if bar["stall"] == REMAINDER]
        assert bool(remainders) == (remainder["status"] != "none")
        if remainders:
            row = remainders[0]
            assert row["stall_label"] == "Not separated" and row["stall_order"] == len(STALLS)
            per_second = totals(doc)[measure] / doc["breakdown"]["iteration_s"]
            assert row["value"] == pytest.approx(remainder["seconds"] * per_second, rel=1e-9, abs=1e-12)
            assert row["ci95"] is not None and row["ci95"] >= 0
            negative_remainders += row["value"] < 0 and row["bar_start"] > row["bar_end"]
        for stall in (bar for bar in mine if bar["stall"] != REMAINDER):
            entry = doc["breakdown"]["stalls"][stall["stall"]]
            if entry["status"] == "clamped_zero":
                assert stall["resolved"] is False and "not resolved" in stall["note"]
    assert negative_remainders > 50


def test_per_run_tables_carry_the_remainder(runs: tuple[list[dict], pd.DataFrame]) -> None:
    docs, frame = runs
    table = views.breakdown.breakdown_table(frame)
    parts = table[[f"{stall}_s" for stall in STALLS]].fillna(0.0).sum(axis=1) + table["unattributed_s"]
    assert parts.tolist() == pytest.approx(table["iteration_s"].tolist(), rel=1e-12)
    shares = (
        table[[f"{stall}_share" for stall in STALLS]].fillna(0.0).sum(axis=1) + table["unattributed_share"]
    )
    assert shares.tolist() == pytest.approx([1.0] * len(table), abs=1e-12)
    assert with_remainder_columns(frame)["unattributed_s"].tolist() == table["unattributed_s"].tolist()


def test_compare_bars_close_at_one_hundred_percent(runs: tuple[list[dict], pd.DataFrame]) -> None:
    _, frame = runs
    configurations = frame.assign(configuration=frame["run_id"]).head(60)
    shares = views.compare.compare_stall_frame(configurations)
    for _, rows in shares.groupby("configuration", sort=False):
        assert rows["bar_end"].iloc[-1] == pytest.approx(1.0, rel=1e-12)
        assert math.fsum(rows["share"]) == pytest.approx(1.0, rel=1e-9)
    assert (shares["stall"] == REMAINDER).any() and (shares["resolved"] == False).any()  # noqa: E712


@pytest.mark.slow
def test_runs_read_back_from_a_store_close_too(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    docs = [noisy_result_doc(seed, legacy=seed % 2 == 0, run_id=f"20261201T0000{seed:02d}Z-{seed:08x}")
            for seed in range(40)]  # fmt: skip
    for doc in docs:
        assert store.ingest_result(db, doc)
    runs, total = views.breakdown.find_runs(db, views.breakdown.RunFilter(limit=100))
    assert total == len(docs)
    by_id = {doc["run_id"]: doc for doc in docs}
    for measure in MEASURES:
        bars = views.breakdown.stall_long_frame(runs, measure)
        for run_id, rows in bars.groupby("run_id"):
            assert rows["bar_end"].iloc[-1] == pytest.approx(totals(by_id[run_id])[measure], rel=1e-9)
    detail = views.breakdown.run_detail(db, docs[1]["run_id"])
    rows = stall_detail_rows(detail)
    assert math.fsum(r["seconds"] for r in rows if r["seconds"] is not None) == pytest.approx(
        detail["iteration_s"]
    )
    # the page's download of the table: the same rows (it held the stored stalls alone)
    download = stall_download_frame(detail)
    assert list(download["stall"]) == [row["stall"] for row in rows]
    assert download["seconds"].sum() == pytest.approx(detail["iteration_s"])


def test_pages_say_not_resolved_instead_of_zero_plus_minus() -> None:
    from pages import _stalls

    clamped = {"stall": "cpu", "seconds": 0.0, "ci95_s": 3.39, "status": "clamped_zero", "resolved": False}
    assert _stalls.stall_figure(clamped) == "not resolved: within the noise (± 3.39 s)"
    assert _stalls.status_text(clamped) == "not resolved"
    # how to resolve it is said once, under the table, not in each row's note
    caption = _stalls.table_caption([clamped, clamped])
    assert caption.count("--target-ci") == 1 and "quieter machine" in caption
    assert "--target-ci" not in _stalls.stall_note(clamped)
    wide = {"stall": "disk", "seconds": 0.002, "ci95_s": 0.5, "status": "measured", "resolved": False}
    assert _stalls.stall_figure(wide) == "2 ms, not resolved (± 500 ms)"
    sure = {"stall": "disk", "seconds": 0.2, "ci95_s": 0.01, "status": "measured", "resolved": True}
    assert _stalls.stall_figure(sure) == "200 ms ± 10 ms" and _stalls.status_text(sure) == "measured"
    remainder = {
        "stall": REMAINDER,
        "seconds": -0.004,
        "ci95_s": 0.01,
        "status": "within_noise",
        "resolved": False,
    }
    assert (
        _stalls.stall_figure(remainder) == "-4 ms ± 10 ms"
        and _stalls.status_text(remainder) == "within noise"
    )
    frame = pd.DataFrame([view_row(noisy_result_doc(seed), True) for seed in range(20)])
    for measure in MEASURES:
        spec = _stalls.breakdown_chart(views.breakdown.stall_long_frame(frame, measure), measure).to_dict()
        assert len(spec["layer"]) == 4  # the stalls, the remainder, the bars' names and the intervals


def test_a_stall_stored_without_a_valid_figure_is_no_bar_and_the_bars_agree_with_the_table() -> None:
    """The table and `stash show` count a 'measured' stall below 0 in the remainder; the bars drew it at
    -0.2 s and a remainder of 0.7 s beside the table's 0.5 s."""
    row = {"run_id": "r", "run_label": "r", "iteration_s": 1.0, "iteration_ci95_s": 0.01,
           "epoch_s": None, "iterations_per_epoch": None, "unattributed_ci95_s": 0.02}  # fmt: skip
    for stall in STALLS:
        row.update({f"{stall}_s": None, f"{stall}_ci95_s": None, f"{stall}_share": None,
                    f"{stall}_epoch_s": None, f"{stall}_status": "not_measured"})  # fmt: skip
    row.update(compute_s=0.5, compute_ci95_s=0.01, compute_share=0.5, compute_status="measured")
    row.update(disk_s=-0.2, disk_ci95_s=0.01, disk_share=-0.2, disk_status="measured")
    bars = views.breakdown.stall_long_frame(pd.DataFrame([row]), "seconds")
    assert "disk" not in set(bars["stall"])
    remainder = bars[bars["stall"] == REMAINDER]["value"].iloc[0]
    assert remainder == pytest.approx(0.5) and bars["bar_end"].iloc[-1] == pytest.approx(1.0)


def test_a_negative_stall_runs_back_from_the_end_of_the_others_and_no_positive_bar_is_drawn_over() -> None:
    """A CPU stall negative beyond the noise was laid in its place: it ran back over interconnect's bar and
    disk's was drawn over both (interconnect's 86 ms read as about 20 ms)."""
    row = {"run_id": "r", "run_label": "r", "iteration_s": 0.25, "iteration_ci95_s": 0.001,
           "epoch_s": None, "iterations_per_epoch": None, "unattributed_ci95_s": 0.002}  # fmt: skip
    for stall in STALLS:
        row.update({f"{stall}_s": None, f"{stall}_ci95_s": None, f"{stall}_share": None,
                    f"{stall}_epoch_s": None, f"{stall}_status": "not_measured"})  # fmt: skip
    figures = {"compute": (0.1, "measured"), "interconnect": (0.1, "measured"), "cpu": (-0.05, "negative"),
               "disk": (0.1, "measured")}  # fmt: skip
    for stall, (seconds, status) in figures.items():
        row.update({f"{stall}_s": seconds, f"{stall}_ci95_s": 0.001, f"{stall}_share": seconds / 0.25,
                    f"{stall}_status": status})  # fmt: skip
    bars = views.breakdown.stall_long_frame(pd.DataFrame([row]), "seconds").set_index("stall")
    assert list(bars.index) == ["compute", "interconnect", "disk", "cpu"]
    interconnect = bars.loc["interconnect"]
    assert (interconnect["bar_start"], interconnect["bar_end"]) == pytest.approx((0.1, 0.2))
    assert (bars.loc["disk", "bar_start"], bars.loc["disk", "bar_end"]) == pytest.approx((0.2, 0.3))
    assert (bars.loc["cpu", "bar_start"], bars.loc["cpu", "bar_end"]) == pytest.approx((0.3, 0.25))


def test_the_pages_advice_for_a_script_that_ran_out_of_steps_is_its_warnings() -> None:
    """The page told a script whose loop ran out to take more iterations per run, as the command did."""
    from pages import _stalls

    unresolved = {"stall": "cpu", "resolved": False}
    ended = ["R3: the script ended by itself in 3 of its 3 launches (after 40 steps at most), so ..."]
    assert "more iterations per run" in _stalls.table_caption([unresolved])
    assert "a script with more to do (see its warning)" in _stalls.table_caption([unresolved], ended)
