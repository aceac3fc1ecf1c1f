"""The Overview's recent runs listed a failed run's iteration time, R0's (one worker), as if it were the
run's; a line under the table says which phase its times are of, only while a listed run has such times."""

from __future__ import annotations

from pathlib import Path

from result_docs import partial_failed_doc, result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store, views
from stash_core.views.breakdown import short_run_id
from stash_core.views.common import plain

R0_NOTE = (
    "failed in R1; its time is R0's (1 worker, synthetic data on the device), the last phase that completed"
)


def recent_table(db: Path):
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    [table] = app.dataframe
    return table.value


def test_the_view_says_what_a_failed_runs_times_are_of(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    completed, partial = result_doc(), partial_failed_doc()
    for doc in (completed, partial, result_doc(status="failed")):
        store.ingest_result(db, doc)
    recent = views.overview.overview(db)["recent"].set_index("run_id")
    assert recent.loc[partial["run_id"], "time_of"] == R0_NOTE
    assert recent.loc[partial["run_id"], "iteration_s"] == 0.2  # kept: the note says what it is
    assert (recent.drop(index=partial["run_id"])["time_of"] == "").all()
    columns = list(recent.columns)
    assert columns.index("time_of") == columns.index("epoch_s") + 1


def recent_notes(db: Path) -> list[str]:
    """The lines under the recent runs: each listed run's error and what its partial times are of."""
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return [caption.value for caption in app.caption if caption.value.startswith("Run **")]


def test_the_recent_runs_say_the_phase_only_while_a_run_has_such_times(empty_db: Path) -> None:
    """Under the table, not in it: as columns, the error's and the note's sentences narrowed the others at
    1280 px (a model's name broken mid-word, headings cut to "Iterati…" and "Partial…")."""
    store.ingest_result(empty_db, result_doc())
    assert recent_notes(empty_db) == []
    partial = partial_failed_doc()
    store.ingest_result(empty_db, partial)
    assert not {"time_of", "error"} & set(recent_table(empty_db).columns)
    [note] = recent_notes(empty_db)
    assert note.startswith(f"Run **{short_run_id(partial['run_id'])}** · Error: ")
    assert note.endswith(" · Partial times: " + plain(R0_NOTE))


def test_a_run_id_stash_did_not_make_is_shown_whole(empty_db: Path) -> None:
    """Two uploaded runs of their own ids, "...-run-1", both read "1" (and `stash show 1` matched both)."""
    for run_id in ("resnet18-baseline-run-1", "resnet50-baseline-run-1"):
        store.ingest_result(empty_db, result_doc(run_id=run_id))
    assert sorted(recent_table(empty_db)["run_id"]) == ["resnet18-baseline-run-1", "resnet50-baseline-run-1"]


def test_a_recent_runs_iteration_carries_its_interval(empty_db: Path) -> None:
    """The table read 0.2051 where the line above it read 205 ms ± 15.4 ms."""
    doc = result_doc()
    store.ingest_result(empty_db, doc)
    row = recent_table(empty_db).set_index("run_id").loc[short_run_id(doc["run_id"])]
    assert row["iteration_ci95_s"] == doc["breakdown"]["iteration_ci95_s"] > 0
    assert row["iteration_s"] == doc["breakdown"]["iteration_s"]  # a number still: the column sorts
