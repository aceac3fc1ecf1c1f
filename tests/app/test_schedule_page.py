"""The Schedule page in Streamlit's AppTest: empty database, a synthetic simulation stored and shown, the
command's defaults, an upload read as the format its columns say, and bad input shown as a message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stash_core.sched import defaults
from stash_core.store import simulations_frame
from stash_core.views.common import in_page_words, plain

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "schedule.py"


def _page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("STASH_DB", str(db))
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _simulate(app: AppTest) -> AppTest:
    next(button for button in app.button if button.label == "Simulate").click()
    return app.run()


def test_a_synthetic_simulation_is_stored_and_compared(tmp_path, monkeypatch):
    db = tmp_path / "r.duckdb"
    app = _page(db, monkeypatch)
    assert not app.exception and any("No simulation stored yet" in info.value for info in app.info)
    app.number_input(key="sched-jobs").set_value(60)
    app.multiselect(key="sched-policies").set_value(["fifo", "las", "network-preempt"])
    app.selectbox(key="sched-tuning").set_value("online")
    app = _simulate(app)
    assert not app.exception and not app.error
    assert sorted(simulations_frame(db)["policy"]) == ["fifo", "las", "network-preempt"]
    assert len(list((tmp_path / "results").glob("sim-*.json"))) == 1
    text = " ".join(md.value for md in app.markdown)
    assert "Lowest makespan:" in text and "Lowest communication overhead:" in text
    assert "On 2 switch(es) × 4 nodes × 8 GPUs (64 GPUs)" in text  # the cluster, as the command says it
    assert "timers set online" in " ".join(c.value for c in app.caption).lower()
    assert set(app.table[0].value.index) == {"fifo", "las", "network-preempt x1 x busy"}  # with its setting
    assert any("mean queueing delay" in str(chart.spec) for chart in app.get("vega_lite_chart"))
    # the database it made is said (it was made without a word), and timers it ignores are greyed out
    assert any(f"Stored in a new database, {plain(str(db))}" in info.value for info in app.info)
    assert app.number_input(key="sched-delay").disabled and app.number_input(key="sched-scale").disabled
    captions = " ".join(c.value for c in app.caption)
    said = plain("No link model: crossing more switches than needed multiplies the stall by 2") + "."
    assert said in captions and "Network sensitivity (slowdown when spread) of the jobs" in captions
    # how much the trace asks of the cluster, and that one trace's order is not a ranking
    assert plain("Offered load: the jobs ask") in captions and "One simulated trace: policies" in captions
    # the past simulation's picker shows its time as typed: an option is not Markdown ("01\\:44" was shown)
    option = app.selectbox(key="sched-pick").options[0]
    assert "\\" not in option and re.search(r"\d\d:\d\d:\d\d UTC", option), option


def test_bad_input_shows_a_message(tmp_path, monkeypatch):
    app = _page(tmp_path / "r.duckdb", monkeypatch)
    app.selectbox(key="sched-tuning").set_value("given")
    app = _simulate(app)  # one simulation stored, and shown
    assert not app.error and app.subheader[0].value.startswith("synthetic(")
    app.multiselect(key="sched-policies").set_value([])
    app = _simulate(app)
    assert not app.exception and "choose at least one policy" in app.error[0].value
    # the error said, the earlier answer not left under it, the past simulations still listed
    headings = [subheader.value for subheader in app.subheader]
    assert headings == ["Past simulations"], headings
    app.multiselect(key="sched-policies").set_value(["delay"])
    app.radio(key="sched-source").set_value("upload")
    app = _simulate(app)
    assert not app.exception and "Upload a trace file" in app.error[0].value


def test_the_pages_defaults_are_the_commands(tmp_path, monkeypatch):
    from stash_core.cli.main import build_parser

    args = build_parser().parse_args(["schedule", "--synthetic-jobs", "1"])
    app = _page(tmp_path / "r.duckdb", monkeypatch)
    value = lambda key: app.number_input(key=key).value  # noqa: E731
    switches, nodes, gpus = (int(v) for v in args.cluster.split("x"))
    assert (value("sched-switches"), value("sched-nodes"), value("sched-gpus")) == (switches, nodes, gpus)
    # None: the command's default, which --trace refuses to be given (it shapes a synthetic trace only)
    assert value("sched-seed") == defaults.SEED and args.seed is None
    assert value("sched-gap") == defaults.MEAN_GAP_S and args.mean_gap_s is None
    assert app.selectbox(key="sched-generator").value == defaults.GENERATOR and args.generator is None
    assert app.multiselect(key="sched-policies").value == args.policies.split(",")
    assert app.selectbox(key="sched-tuning").value == "split" and args.tuning is None  # None: split
    assert app.selectbox(key="sched-arrivals").value == "poisson" and args.arrivals is None  # poisson
    # None: the command's default, which a policy run without preemption refuses to be given
    assert (value("sched-checkpoint"), value("sched-min-run")) == (defaults.CHECKPOINT_S, defaults.MIN_RUN_S)
    assert args.checkpoint_s is None and args.min_run_s is None
    # None: the command's default, which --node-gbps refuses to be given (a link model replaces the factor)
    assert (value("sched-uplink-factor"), value("sched-reference")) == (
        defaults.UPLINK_FACTOR,
        defaults.REFERENCE,
    ) and args.uplink_factor is None and args.reference_gbps is None  # (--reference-gbps needs --node-gbps)
    assert value("sched-node-gbps") == 0.0 and args.node_gbps is None  # no link model either way
    # the timers the command uses when given ones are asked for: delay 600 s (not 0: delay would be spread)
    assert value("sched-delay") == 600.0 and value("sched-scale") == 1.0
    app.number_input(key="sched-jobs").set_value(40)
    app.multiselect(key="sched-policies").set_value(["delay"])
    app.selectbox(key="sched-tuning").set_value("given")
    app = _simulate(app)
    assert not app.exception and list(app.table[0].value.index) == ["delay 600 s"]


def test_an_upload_is_read_as_the_format_its_columns_say(tmp_path, monkeypatch):
    app = _page(tmp_path / "r.duckdb", monkeypatch)
    # a synthetic field past its bound, greyed out with an upload, is not the upload's problem
    app.number_input(key="sched-jobs").set_value(900_000)
    app.radio(key="sched-source").set_value("upload")
    app = app.run()
    assert "told from the file's columns" in app.get("file_uploader")[0].label
    app.selectbox(key="sched-format").set_value("helios")
    app = app.run()
    assert "Helios cluster_log.csv" in app.get("file_uploader")[0].label
    assert "PAI" not in app.get("file_uploader")[0].label
    app.selectbox(key="sched-format").set_value("auto")
    csv = (
        b"job_id,num_gpu,submit_time,duration,network_slowdown\nX,3,0,100,1.5\nZ,3,0,100,1.5\nY,2,1,100,1.5\n"
    )
    app.get("file_uploader")[0].set_value(("jobs.csv", csv, "text/csv"))
    app.multiselect(key="sched-policies").set_value(["spread", "fifo-consolidate"])
    app.selectbox(key="sched-tuning").set_value("given")
    # a trace draws no arrivals and no seed: its own submit times, or all at once (poisson was sent unused)
    assert app.number_input(key="sched-seed").disabled
    assert app.selectbox(key="sched-trace-arrivals").options == ["as in the trace", "batch"]
    app = _simulate(app)
    assert not app.exception and not app.error
    assert "jobs.csv (read as tiresias)" in app.subheader[0].value
    app.selectbox(key="sched-trace-arrivals").set_value("batch")
    app = _simulate(app)
    assert not app.exception and not app.error
    assert "jobs.csv (read as tiresias), all submitted at 0" in app.subheader[0].value


def test_a_simulation_too_large_for_the_page_is_refused_with_the_command_named(tmp_path, monkeypatch):
    db = tmp_path / "r.duckdb"
    app = _page(db, monkeypatch)
    app.number_input(key="sched-switches").set_value(100)
    app.number_input(key="sched-nodes").set_value(200)
    app.number_input(key="sched-gpus").set_value(1)
    app = _simulate(app)
    assert not app.exception and "stash schedule" in app.error[0].value
    assert "20,000 nodes" in app.error[0].value and not db.exists()


def test_the_link_fields_take_what_the_simulator_takes(tmp_path, monkeypatch):
    # The page stopped node uplinks at 1e5 Gbit/s and read slowdowns from 0.1, inside the simulator's range.
    from stash_core.sched.fabric import MAX_GBPS, MIN_GBPS

    # Bounds are checked on Simulate (pages/_fields.py): the browser kept a number past one out of the form,
    # and Simulate ran the previous value (900,000 jobs typed, 300 simulated).
    for key, value, said in (
        ("sched-node-gbps", MAX_GBPS * 2, f"Node uplink (Gbit/s): must be from 0 to {int(MAX_GBPS):,}, got"),
        ("sched-reference", MIN_GBPS / 2, f"Slowdowns read at (Gbit/s): must be from {MIN_GBPS:g}"),
        ("sched-jobs", 900_000, "Synthetic jobs: must be from 1 to 20,000, got 900,000"),
        # the browser's whole-number input read 2.5 as 2 without a word
        ("sched-gpus", 2.5, "GPUs per node: must be a whole number, got 2.5"),
    ):
        app = _page(tmp_path / "r.duckdb", monkeypatch)
        app.number_input(key=key).set_value(value)
        app = _simulate(app)
        assert said in " ".join(error.value for error in app.error) and not app.table
    app = _page(tmp_path / "r.duckdb", monkeypatch)
    app.number_input(key="sched-node-gbps").set_value(0.0)  # 0: no link model, in bounds
    assert not app.run().error


def test_a_whole_number_field_keeps_a_huge_number_a_float_for_its_message() -> None:
    """1e300 typed in a whole-number field was made an int, and its refusal printed 301 digits."""
    from pages._fields import as_typed

    assert as_typed(8.0) == 8 and isinstance(as_typed(8.0), int) and as_typed(2.5) == 2.5
    assert isinstance(as_typed(1e300), float) and as_typed(None) is None


def test_every_policys_bar_is_named_and_every_legend_entry_has_room(tmp_path, monkeypatch) -> None:
    """Nine policies' bars named five (the theme drops overlapping axis labels), and a legend of nine in
    one row was cut to five at 800 px."""
    import pandas as pd

    monkeypatch.setenv("STASH_DB", str(tmp_path / "none.duckdb"))  # importing the page runs it: no database
    from pages import schedule as page

    labels = [f"policy {index}" for index in range(9)]
    frame = pd.DataFrame({"label": labels, "metric": "makespan", "hours": range(9)})
    spec = page.metric_bars(frame, "makespan").to_dict()
    assert spec["encoding"]["y"]["axis"]["labelOverlap"] is False
    assert spec["height"] == {"step": 26}  # a row per bar, tall enough for its name


def test_timers_tuned_on_too_few_jobs_are_said_in_the_pages_words(tmp_path, monkeypatch) -> None:
    from stash_core.sched import Cluster, Policy, TraceJob, plan_policies

    monkeypatch.setenv("STASH_DB", str(tmp_path / "none.duckdb"))
    from pages import schedule as page

    jobs = [TraceJob(f"J{index}", 1, 1000.0 * index, 10.0, None, 2.0, "trace") for index in range(6)]
    how = plan_policies([Policy("delay")], jobs, Cluster(1, 2, 4), "split", fraction=0.5)[2]
    assert "too few to tune on" in how and "--tuning" in how  # the command's words ...
    said = in_page_words(how, page.WORDS)
    assert "--tuning" not in said and "choose timers online or given, or more jobs" in said  # ... the page's


def test_a_database_that_cannot_be_opened_is_said_once_before_anything_runs(tmp_path, monkeypatch) -> None:
    """A corrupt database let the simulation run, then said its error twice (the form's and the past
    simulations')."""
    db = tmp_path / "garbage.duckdb"
    db.write_bytes(b"this is not a database at all")
    app = _page(db, monkeypatch)
    assert not app.exception
    assert [error.value for error in app.error if "corrupt or not a DuckDB database" in error.value] == [
        error.value for error in app.error
    ] and len(app.error) == 1, app.error
    assert not [button for button in app.button if button.label == "Simulate"]
