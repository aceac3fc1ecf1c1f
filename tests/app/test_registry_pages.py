"""What the pages say about runs they did not start and runs that do not compare: a `stash profile` from a
terminal on the Run page and the Overview, another measurement on the machine, a contradicted instance label
on Compare, a fit without enough profiles on Models."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core.engine import job_state, jobs
from stash_core.engine.progress import Reporter
from stash_core.store import ingest_result

APP = str(REPO / "app.py")


class _Plan:
    name, description = "R0", "1 worker, synthetic data on the device"

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "workers": 1, "nodes": 1}


def open_page(path: str | None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=90)
    app.run()
    if path:
        app.switch_page(path).run()
    return app


def texts(app: AppTest) -> str:
    kinds = ("markdown", "caption", "info", "success", "warning", "error")
    return "\n".join(str(element.value) for kind in kinds for element in getattr(app, kind))


def test_a_profile_from_a_terminal_shows_on_the_run_page_and_the_overview(
    empty_db: Path, monkeypatch
) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    argv = ["stash", "profile", "--model", "tiny", "--batch-size", "8"]
    with jobs.register_profile(empty_db, argv, label="tiny · batch 8") as record:
        reporter = record.reporter(Reporter())
        reporter.phase_started(_Plan(), 0, 2)
        run = open_page("pages/run.py")
        assert not run.exception and not run.error
        shown = texts(run)
        assert "tiny · batch 8" in shown and "started from a terminal" in shown
        assert "A profile is running on this machine: tiny · batch 8 (started from a terminal)" in shown
        assert "R0" in shown
        assert run.button(key="run-start").disabled  # no second profile while this one runs
        overview = open_page(None)
        assert "Profile running** (started from a terminal) · tiny · batch 8" in texts(overview)
        record.done("20261122T104100Z-3f2a9c1b", "completed", None)
    assert jobs.list_jobs(empty_db)[0].status == "completed"


def test_the_overview_says_a_profile_was_started_from_python(empty_db: Path, monkeypatch) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    argv = ["stash", "profile", "--model", "tiny", "--batch-size", "8"]
    with jobs.register_profile(empty_db, argv, label="tiny · batch 8", origin="python") as record:
        record.reporter(Reporter()).phase_started(_Plan(), 0, 2)
        overview = open_page(None)
        assert not overview.exception
        assert "Profile running** (started from Python) · tiny · batch 8" in texts(overview)
        record.done("20261122T104100Z-3f2a9c1b", "completed", None)


def test_a_measurement_not_registered_here_is_named_before_a_second_one_starts(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = [{"pid": 4242, "command": "/opt/venv/bin/stash profile --model resnet50 --db /elsewhere.duckdb"}]
    monkeypatch.setattr(job_state, "measuring_processes", lambda known_pids=frozenset(): other)
    app = open_page("pages/run.py")
    assert "Another measurement is running on this machine (pid 4242: /opt/venv/bin/stash profile" in texts(
        app
    )
    assert app.button(key="run-start").disabled
    app.checkbox(key="run-start-anyway").check().run()
    assert not app.button(key="run-start").disabled  # the user was told, and chose to start anyway


def test_compare_warns_about_a_label_the_machine_contradicts(empty_db: Path) -> None:
    ingest_result(empty_db, result_doc("resnet18", instance="g4dn.xlarge"))  # a CPU-only machine
    app = open_page("pages/compare.py")
    assert not app.exception and not app.error
    warnings = [warning.value for warning in app.warning]
    assert any("Instance label g4dn.xlarge" in text and "the machine has no GPU" in text for text in warnings)
    table = app.dataframe[0].value
    measured = [name for name in table["Configuration"] if not name.endswith("predicted")]
    assert measured == ["g4dn.xlarge · 2w · label contradicted"]
    assert list(table["USD/h"])[: len(measured)] == ["–"]


def test_models_says_how_many_profiles_a_fit_still_needs(empty_db: Path) -> None:
    for name, grad_bytes in (("m1", 10e6), ("m2", 40e6)):
        doc = result_doc(name, grad_bytes=int(grad_bytes), instance="lab",
                         stalls={"compute": 0.3, "interconnect": 0.002 + 1e-9 * grad_bytes})  # fmt: skip
        ingest_result(empty_db, doc)
    app = open_page("pages/models.py")
    assert not app.exception
    assert any("No best model: not enough profiles (2 of 4 needed" in info.value for info in app.info)
    table = app.dataframe[0].value
    assert not table["best"].any()
    # every fit is short: its figure columns, all "–", are left out; each note says why, never "None"
    assert "r2" not in table and table["note"].str.startswith("not enough profiles (2 of").all()
    assert not [metric for metric in app.metric if metric.label == "Best model"]
