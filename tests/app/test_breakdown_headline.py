"""The Stall breakdown page headlines a physically impossible breakdown's warning, never its share above 100%,
and never a stall within its noise as the largest."""

from __future__ import annotations

from pathlib import Path

import duckdb
from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store, views
from stash_core.analysis.coherence import IMPOSSIBLE
from stash_core.views.common import plain

MEASUREMENTS = REPO / "docs" / "measurements"
WARNING = f"{IMPOSSIBLE}: R0 took 0.92 s per iteration and R1 0.22 s. Cause: threads. To do: fix them"


def open_run(run_id: str) -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["run"] = run_id
    app.run()
    app.switch_page("pages/breakdown.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def largest_stall(app: AppTest) -> str | None:
    return next((metric.value for metric in app.metric if metric.label == "Largest stall"), None)


def test_an_impossible_breakdown_is_headlined_by_its_warning(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.92, "interconnect": -0.70}, warnings=[WARNING])
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    assert largest_stall(app) is None  # no "Compute, 418% of the iteration"
    assert [e.value for e in app.error] == [plain(WARNING)]  # shown as data (views.common.plain)
    assert plain(WARNING) not in [w.value for w in app.warning]  # said once, as the headline


def test_a_stored_run_with_a_share_above_100_percent_is_headlined_without_a_stored_warning(
    empty_db: Path,
) -> None:
    doc = result_doc(stalls={"compute": 0.92, "interconnect": -0.70})
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    assert largest_stall(app) is None
    assert (
        len(app.error) == 1
        and app.error[0].value.startswith(IMPOSSIBLE)
        and "compute is 418%" in app.error[0].value
    )


def test_a_possible_breakdown_headlines_its_largest_resolved_stall(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.30, "interconnect": 0.08})
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    assert largest_stall(app) == "Compute" and not app.error


def test_a_stall_stored_without_a_value_leaves_the_largest_stall_unknown(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.30, "interconnect": 0.08})
    store.ingest_result(empty_db, doc)
    with duckdb.connect(str(empty_db)) as con:  # a hand-edited row: the largest stall lost its figure
        con.execute("UPDATE stalls SET seconds = NULL WHERE stall = 'compute'")
    app = open_run(doc["run_id"])
    assert largest_stall(app) == "unknown"  # not "Interconnect"
    table = app.dataframe[-1].value
    compute = table[table["Stall"] == "Compute"].iloc[0]
    assert compute["Status"] == "not valid" and "has no value stored" in compute["Note"]


def test_epoch_figures_carry_their_interval(empty_db: Path) -> None:
    doc = result_doc(stalls={"compute": 0.10, "interconnect": 0.02})
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    [epoch] = [metric for metric in app.metric if metric.label == "Epoch"]
    assert epoch.value != "–" and str(epoch.proto.delta).startswith("± ") and "(95%)" in epoch.proto.delta
    tables = [frame.value for frame in app.dataframe if "Per epoch" in frame.value.columns]
    rows = tables[0] if tables else None
    assert rows is not None and not rows.empty
    left_over = rows["Status"] != "nothing left over"  # "0 s" as its Per iteration cell
    assert all(" ± " in text for text in rows["Per epoch"][left_over] if text != "–")


def test_a_scripts_unknown_batch_is_said_in_words_not_as_none(empty_db: Path) -> None:
    """The example DDP script profiled on an H200 (docs/measurements): its batch was not measured."""
    [(_, run_id, _)] = store.ingest_files(empty_db, [MEASUREMENTS / "h200-script-profile-2026-11-30.json"])
    app = open_run(run_id)
    [heading] = [markdown.value for markdown in app.markdown if markdown.value.startswith("#### ")]
    assert "batch unknown" in heading and "None" not in heading


def test_a_cpu_run_whose_workers_took_every_core_says_so_as_the_command_line_does(empty_db: Path) -> None:
    """`stash profile` and `stash show` said that the interconnect stall holds the workers' competition for
    the cores; the page, showing the same figure, left it out."""
    doc = result_doc(workers=2, stalls={"compute": 0.2, "interconnect": 0.181},
                     spec_extra={"threads_per_worker": 1})  # fmt: skip
    doc["fingerprint"]["cpu_cores_logical"] = 2
    store.ingest_result(empty_db, doc)
    notes = [info.value for info in open_run(doc["run_id"]).info]
    said = "2 workers x 1 thread(s) share this machine's 2 cores"
    assert any(said in note and "181" in note for note in notes)


def test_a_small_measured_share_is_never_said_as_zero(empty_db: Path) -> None:
    """A 3 ms stall of a 671 ms iteration read "0%" in the Stalls table (as a stall of none) and the compute
    beside it "100%"."""
    doc = result_doc(stalls={"compute": 0.668, "interconnect": 0.003})  # each within 2% (result_docs)
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    assert largest_stall(app) == "Compute"
    shares = [cell for frame in app.dataframe for cell in frame.value.get("Share", [])]
    assert shares[:2] == ["99.6%", "0.4%"], shares  # compute, interconnect


def test_a_share_that_would_round_to_an_end_says_so() -> None:
    from pages._shared import share_text

    said = {value: share_text(value) for value in (0.0004, 0.9996, -0.0003, 0, 1, 0.004, 0.996, 0.37, -0.02)}
    assert said == {0.0004: "<0.1%", 0.9996: ">99.9%", -0.0003: ">-0.1%", 0: "0%", 1: "100%", 0.004: "0.4%",
                    0.996: "99.6%", 0.37: "37.0%", -0.02: "-2.0%"}  # fmt: skip


def test_iterations_past_the_charts_limit_are_said_to_be_a_part(empty_db: Path) -> None:
    """A run of more kept iterations than the charts draw showed its first phases only, without a word
    (views: each phase is now thinned evenly)."""
    doc = result_doc(samples=True, iterations=5_100)  # four phases: 20,400 iterations, past 20,000
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    app.segmented_control(key="bd-section").set_value("Iteration times").run()
    assert not app.exception, [e.value for e in app.exception]
    said = [caption.value for caption in app.caption if "stored iterations are drawn" in caption.value]
    assert said and "of the run's 20,400 stored iterations" in said[0], [c.value for c in app.caption]


def test_a_stall_at_zero_is_zero_an_epoch_as_its_share_is(empty_db: Path) -> None:
    """A clamped stall read "0%" of the iteration and "–" an epoch, as a stall never measured does."""
    doc = result_doc(stalls={"compute": 0.10, "interconnect": 0.02, "disk": 0.0})
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    table = app.dataframe[-1].value.set_index("Stall")
    disk = table.loc["Disk fetch"]
    assert disk["Share"] == "0%" and disk["Per epoch"].startswith("0 ")
    assert table.loc["Network", "Per epoch"] == "–"  # not measured


def test_an_impossible_run_is_marked_in_the_lists_of_runs_not_only_on_its_own_page(empty_db: Path) -> None:
    impossible = result_doc(stalls={"compute": 0.92, "interconnect": -0.70}, warnings=[WARNING])
    possible = result_doc(stalls={"compute": 0.30, "interconnect": 0.08})
    for doc in (impossible, possible):
        store.ingest_result(empty_db, doc)
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90).run()
    recent = next(frame.value for frame in app.dataframe if "run_id" in frame.value.columns)
    figures = dict(zip(recent["run_id"], recent["figures"], strict=True))
    short = views.breakdown.short_run_id  # the Run column shows the tail `stash show` takes
    assert figures == {short(impossible["run_id"]): "impossible", short(possible["run_id"]): ""}
    app.switch_page("pages/breakdown.py").run()
    assert not app.exception, [e.value for e in app.exception]
    picker = app.selectbox(key="bd-run")
    shown = {run_id: [o for o in picker.options if run_id.rsplit("-", 1)[-1] in o] for run_id in
             (impossible["run_id"], possible["run_id"])}  # fmt: skip
    assert [label.endswith(" · impossible") for label in shown[impossible["run_id"]]] == [True], shown
    assert [label.endswith("impossible") for label in shown[possible["run_id"]]] == [False], shown


def test_stalls_whose_intervals_overlap_are_not_told_apart_in_the_headline(empty_db: Path) -> None:
    """"Largest stall: Compute, 45.9% of the iteration" beside compute 67.9 ± 53.9 ms and interconnect
    61.9 ± 39 ms."""
    doc = result_doc(stalls={"compute": 0.0679, "interconnect": 0.0619, "cpu": 0.001})
    for stall, ci95_s in (("compute", 0.0539), ("interconnect", 0.039)):
        doc["breakdown"]["stalls"][stall]["ci95_s"] = ci95_s
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    [metric] = [metric for metric in app.metric if metric.label == "Largest stall"]
    assert metric.value == "Not told apart" and "Compute or Interconnect" in str(metric.delta)


def test_an_interrupted_run_is_said_to_be_so_in_words_not_as_an_error(empty_db: Path) -> None:
    """"This run interrupted: cancelled by the user", in red."""
    doc = result_doc(stalls={"compute": 0.30, "interconnect": 0.08})
    doc.update(status="interrupted", error="cancelled by the user")
    store.ingest_result(empty_db, doc)
    app = open_run(doc["run_id"])
    assert not app.error
    said = "This run was interrupted (cancelled by the user): its breakdown is of the runs done before it"
    assert any(warning.value.startswith(said) for warning in app.warning)
