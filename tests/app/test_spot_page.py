"""The Spot page in Streamlit's AppTest: the paper's workload reproduces Table I's plan, the window search and
a small revocation simulation; bad workloads and an impossible deadline are messages, not tracebacks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from support import shown

from stash_core.views import spot as view

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "spot.py"


def _page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("STASH_DB", str(db))
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")
    app = AppTest.from_file(str(PAGE), default_timeout=60)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _plan(app: AppTest) -> AppTest:
    return app.button(key="spot-plan").click().run()


def _upload(app: AppTest, name: str, data: bytes) -> AppTest:
    app.radio(key="spot-source").set_value("Upload a workload file").run()
    app.file_uploader[0].set_value((name, data, "application/json")).run()
    return app


def _errors(app: AppTest) -> str:
    return " ".join(shown(error.value) for error in app.error)


def test_the_papers_workload_gives_table_one_against_on_demand(tmp_path, monkeypatch):
    db = tmp_path / "fresh.duckdb"
    app = _page(db, monkeypatch)
    assert not app.exception
    assert app.multiselect(key="spot-instances").value == ["g3.8xlarge", "g3.16xlarge"]
    app = _plan(app)
    assert not app.exception and not app.error
    # spotDNN Table I: 5 x g3.8xlarge + 3 x g3.16xlarge, 2,549 s, $5.33 spot and $17.75 on demand
    assert any(m.value == "### 3 x g3.16xlarge + 5 x g3.8xlarge" for m in app.markdown)
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["Training time"] == "2,549 s"
    assert metrics["Cost (spot)"] == "$5.35"
    assert metrics["Cost (on-demand)"] == "$17.76"
    # the headline states the plan's risk at the default revocation rate, not only the saving
    risk = [m.value for m in app.markdown if m.value.startswith("**Risk:** at 0.5 revocations per instance")]
    assert len(risk) == 1 and "meets the deadline in" in risk[0] and "expected cost $" in risk[0]
    deltas = {metric.label: metric.delta for metric in app.metric}
    assert deltas["Cost (on-demand)"].endswith("if never revoked")
    assert any("Worker counts searched: 1 to 8 (eqs. 15-16 allow up to 13" in c.value for c in app.caption)
    candidates = next(frame.value for frame in app.dataframe if "cluster" in frame.value.columns)
    assert set(candidates["within_budget"]) <= {"yes", "no"}  # words, not false/true
    windows = next(frame.value for frame in app.dataframe if "windows" in frame.value.columns)
    assert list(windows["workers"]) == list(range(1, 9))  # n from 1 to the quotas' 8 (n_upper is 13)
    assert list(windows["windows"]) == [8 - n + 1 for n in range(1, 9)]  # 8 instances, windows of n
    assert list(windows["within_budget"]) == [0] * 7 + [1]
    # two types: every mix of counts is a window, and every one was tried (the search said so)
    assert any(h.value == "Clusters searched" for h in app.subheader)
    every_mix = "For each worker count n, every mix of instance counts"
    assert any(c.value.startswith(every_mix) for c in app.caption)
    assert any("Fragile plan" in w.value and "g3" in w.value for w in app.warning)
    assert not db.exists()  # planning reads the catalog, writes nothing


def test_a_small_revocation_simulation(tmp_path, monkeypatch):
    app = _plan(_page(tmp_path / "fresh.duckdb", monkeypatch))
    app.slider(key="spot-rate").set_value(1.0)
    app.number_input(key="spot-runs").set_value(12)
    app = app.button(key="spot-simulate").click().run()
    assert not app.exception and not app.error
    rows = next(frame.value for frame in app.dataframe if "p_deadline" in frame.value.columns)
    by = rows.set_index("strategy")
    assert list(by.index) == ["spotDNN", "no contention", "on-demand"]
    assert by.loc["spotDNN", "runs"] == 12 and by.loc["on-demand", "runs"] == 1
    assert pd.isna(by.loc["on-demand", "p_deadline_range"])  # one run, never revoked: no chance in it
    # each share with its interval over the runs (21.01% of 695 runs was shown with two decimals and none)
    assert pd.isna(by.loc["on-demand", "p_deadline_range"])  # one run, never revoked: nothing random
    low, high = (float(part.rstrip("%")) for part in by.loc["spotDNN", "p_deadline_range"].split(" to "))
    assert low <= by.loc["spotDNN", "p_deadline"] <= high and high - low > 20  # 12 runs: wide
    assert by.loc["spotDNN", "mean_revocations"] > 0
    # revoked spot instances cost time: the mean spot run is slower than the unrevoked on-demand one
    assert by.loc["spotDNN", "mean_time_s"] > by.loc["on-demand", "mean_time_s"]
    assert by.loc["spotDNN", "mean_cost_usd"] < by.loc["on-demand", "mean_cost_usd"]
    # all the runs made and all finished: the notes above would say otherwise; as columns, twelve in all cut
    # the headings at 1280 px ("never finis…", "revocation…")
    assert not {"runs_asked", "never_finishes"} & set(rows.columns)


def test_an_impossible_deadline_is_explained(tmp_path, monkeypatch):
    app = _page(tmp_path / "fresh.duckdb", monkeypatch)
    app.number_input(key="spot-deadline").set_value(600.0)
    app = _plan(app)
    assert not app.exception
    assert re.search(r"No spot plan: no cluster of \d+ to \d+ workers trains within 600 s", _errors(app))
    assert "needs 2,549 s" in _errors(app)


def test_a_target_below_the_loss_floor_is_a_message(tmp_path, monkeypatch):
    app = _page(tmp_path / "fresh.duckdb", monkeypatch)
    app.number_input(key="spot-target").set_value(0.3)
    app = _plan(app)
    assert not app.exception
    assert "at or below the loss model's floor g5 = 0.5" in _errors(app)


def test_no_instance_chosen_is_a_message(tmp_path, monkeypatch):
    app = _page(tmp_path / "fresh.duckdb", monkeypatch)
    app.multiselect(key="spot-instances").set_value([]).run()
    app = _plan(app)
    assert not app.exception
    assert "choose at least one instance type" in _errors(app)


def test_a_workload_of_instance_types_the_catalog_lacks_says_so(tmp_path, monkeypatch):
    """The only word was "choose at least one instance type with a quota of 1 or more"."""
    doc = json.loads(view.example_workload_text())
    doc["compute_s"] = {"lab-box": next(iter(doc["compute_s"].values()))}
    app = _upload(_page(tmp_path / "fresh.duckdb", monkeypatch), "w.json", json.dumps(doc).encode())
    assert not app.exception
    said = " ".join(shown(w.value) for w in app.warning)
    assert "name 1 instance type(s) the catalog's GPU instances do not have: lab-box" in said


def test_a_workload_without_compute_times_says_where_they_would_come_from(tmp_path, monkeypatch):
    """The only word was "choose at least one instance type", which no choice would have fixed."""
    doc = json.loads(view.example_workload_text())
    del doc["compute_s"]
    app = _upload(_page(tmp_path / "fresh.duckdb", monkeypatch), "w.json", json.dumps(doc).encode())
    assert not app.exception
    said = " ".join(shown(info.value) for info in app.info)
    assert 'no compute times ("compute_s"' in said and 'no "model" whose stored profiles' in said
    app = _upload(app, "m.json", json.dumps({**doc, "model": "resnet18"}).encode())
    said = " ".join(shown(info.value) for info in app.info)
    assert "takes its time from a completed profile of resnet18 on it in this database" in said
    app = _upload(app, "whole.json", view.example_workload_text().encode())
    assert not any("compute times" in shown(info.value) for info in app.info)


def test_an_uploaded_workload_plans_and_a_malformed_one_is_a_message(tmp_path, monkeypatch):
    app = _upload(
        _page(tmp_path / "fresh.duckdb", monkeypatch), "mine.json", view.example_workload_text().encode()
    )
    assert not app.exception
    app = _plan(app)
    assert not app.exception and not app.error
    assert any(m.value == "### 3 x g3.16xlarge + 5 x g3.8xlarge" for m in app.markdown)
    app = _upload(app, "broken.json", b'{"param_mb": 11.54, "a1": ')
    app = _plan(app)
    assert not app.exception
    assert "the workload is not valid JSON (line 1" in _errors(app)
    app = _upload(app, "empty.json", b"{}")
    app = _plan(app)
    assert not app.exception
    assert "param_mb is missing" in _errors(app)


def test_a_workload_without_contention_plans_and_says_it_has_no_upper_bound(tmp_path, monkeypatch):
    """a1 = 1e-6, b1 = -1: eq. 15 is beyond any quota; the window search lists the counts with windows."""
    uncontended = {**view.example_workload(), "a1": 1e-6, "b1": -1.0}
    app = _upload(_page(tmp_path / "fresh.duckdb", monkeypatch), "w.json", json.dumps(uncontended).encode())
    app = _plan(app)
    assert not app.exception and not app.error
    assert any(
        "Worker counts searched: 1 to 8 (eqs. 15-16 set no upper bound" in c.value for c in app.caption
    )
    windows = next(frame.value for frame in app.dataframe if "windows" in frame.value.columns)
    assert list(windows["workers"]) == list(range(1, 9))


def test_candidates_outside_the_loss_model_are_said_in_words(tmp_path, monkeypatch):
    """g2 b + g3 = 1000 - 0.2 b: a g3.16xlarge's batch (4 x 2048) is outside the loss model."""
    outside = {**view.example_workload(), "g": [876.5, -0.2, 1000, 1.0, 0.5], "batch_per_gpu": 2048,
               "compute_s": {"g3.4xlarge": 1.0, "g3.16xlarge": 0.5}}  # fmt: skip
    app = _upload(_page(tmp_path / "fresh.duckdb", monkeypatch), "w.json", json.dumps(outside).encode())
    app = _plan(app)
    assert not app.exception
    candidates = next(frame.value for frame in app.dataframe if "cluster" in frame.value.columns)
    out = candidates[candidates["within_budget"] == "no: outside the loss model"]
    assert len(out) and out[["training_s", "cost_usd"]].isna().all().all()
    assert "outside_loss_model" not in candidates.columns


@pytest.mark.parametrize(
    "data, message",
    [
        (b'{"param_mb": 11.54, "a1": ', "not valid JSON (line 1"),
        (b"[1, 2]", "must be a JSON object"),
        (b"{}", "param_mb is missing"),  # it said "must be a number, got null"
        (json.dumps({**view.example_workload(), "g": [1, 2]}).encode(), "five numbers g1..g5"),
        (json.dumps({**view.example_workload(), "compute_s": {}}).encode(), "no compute time for g3.8xlarge"),
        (b"\xff\xfe\x00", "not a text file"),
        # Python's words before ("maximum recursion depth exceeded while decoding a JSON array")
        (b"[" * 50_000 + b"]" * 50_000, "the workload nests JSON deeper than 64 levels"),
        (b'{"param_mb": 1' + b"0" * 5000 + b"}", "the workload holds a number too long to read"),
    ],
)
def test_bad_workloads_are_one_clear_message(tmp_path, data, message):
    from stash_core.errors import UsageError

    with pytest.raises(UsageError, match=None) as caught:
        text = view.workload_text(data, "w.json")
        view.plan(tmp_path / "r.duckdb", text, view.EXAMPLE_OFFERS, 0.8, 2600.0)
    assert message in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_the_plan_s_revocation_overhead_is_the_spot_plan_s_and_the_simulation_starts_from_it(
    tmp_path, monkeypatch
):
    """With 300 s of revocation overhead in the plan, the on-demand plan got it too (3 x g3.16xlarge + 4 x
    g3.8xlarge, $18.96, where never revoked it is 1 + 5 at $12.90), and the simulation started from the plan
    made without it: one page, two answers."""
    app = _page(tmp_path / "fresh.duckdb", monkeypatch)
    app.number_input(key="spot-deadline").set_value(3000.0)
    app.number_input(key="spot-revocation").set_value(300.0)
    app = _plan(app)
    assert not app.exception and not app.error
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["Cost (on-demand)"] == "$12.90"
    shown_plan = next(m.value[4:] for m in app.markdown if m.value.startswith("### "))
    app.number_input(key="spot-runs").set_value(3)
    app = app.button(key="spot-simulate").click().run()
    rows = next(frame.value for frame in app.dataframe if "p_deadline" in frame.value.columns)
    assert rows.set_index("strategy").loc["spotDNN", "first_plan"] == shown_plan


def test_the_revocation_simulations_defaults_are_the_commands(tmp_path, monkeypatch):
    """The page simulated 100 runs from seed 1 (its seed could not be 0) where `spot-simulate` and the risk
    `stash spot` states take 200: the same plan showed other odds on the page."""
    from stash_core.cli.main import build_parser

    simulate = ["spot-simulate", "--workload", "w.json", "--instances", "a:1", "--target-loss", "1",
                "--deadline-s", "1", "--rate-per-h", "1"]  # fmt: skip
    args = build_parser().parse_args(simulate)
    app = _plan(_page(tmp_path / "fresh.duckdb", monkeypatch))
    from stash_core.spot.simulate import DEFAULT_SEED, RISK_RUNS

    # None: the command's own, its help says 200 (and `stash spot` states the risk of RISK_RUNS runs)
    assert app.number_input(key="spot-runs").value == RISK_RUNS == 200 and args.runs is None
    assert app.number_input(key="spot-seed").value == DEFAULT_SEED and args.seed is None
    app.number_input(key="spot-seed").set_value(0)  # a seed of 0 is taken (bounds checked on Simulate)
    app = next(button for button in app.button if button.label == "Simulate").click().run()
    assert not any("Seed" in error.value for error in app.error)


def test_a_deadline_past_its_bound_is_named_on_plan_not_planned_with_the_previous_one(tmp_path, monkeypatch):
    """The browser kept a deadline of 0 out of the form and Plan then planned the previous 2,600 s."""
    app = _page(tmp_path / "fresh.duckdb", monkeypatch)
    app.number_input(key="spot-deadline").set_value(0.0)
    app = app.button(key="spot-plan").click().run()
    assert "Deadline (s): must be from 1 to 31,536,000, got 0" in " ".join(error.value for error in app.error)
    assert not app.metric  # no plan shown


def test_a_plan_for_an_earlier_form_says_so(tmp_path, monkeypatch):
    """Planned for the paper's workload, then another chosen: the old plan stayed under the new form without
    a word (and an upload's earlier error under a good file)."""
    app = _plan(_page(tmp_path / "fresh.duckdb", monkeypatch))
    assert not [warning for warning in app.warning if "has changed" in warning.value]
    app.number_input(key="spot-deadline").set_value(2000).run()
    assert any("The form has changed since Plan was pressed" in warning.value for warning in app.warning)
    app = _plan(app)
    assert not [warning for warning in app.warning if "has changed" in warning.value]
