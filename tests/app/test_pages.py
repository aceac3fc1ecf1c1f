"""Every dashboard page in AppTest, on an empty and a populated database, and what each page does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc, run_count
from streamlit.testing.v1 import AppTest
from support import REPO, shown

from stash_core.engine import jobs
from stash_core.spec import default_of
from stash_core.spec_parse import BATCH_SIZE
from stash_core.store import examples
from stash_core.views.run_form import number_range

APP = str(REPO / "app.py")
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
}
TIMEOUT_S = 90


@pytest.fixture(autouse=True)
def _validate_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages skip Altair's schema validation for speed; here every chart they draw is validated.
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")


def open_page(title: str, query: dict[str, str] | None = None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in (query or {}).items():
        app.query_params[key] = value
    app.run()
    if PAGES[title] != PAGES["Overview"]:
        app.switch_page(PAGES[title]).run()
    return app


def charts(app: AppTest) -> list:
    return list(app.get("vega_lite_chart"))


def texts(app: AppTest) -> str:
    parts = [
        e.value
        for kind in ("markdown", "caption", "info", "success", "warning", "error")
        for e in getattr(app, kind)
    ]
    return "\n".join(str(p) for p in parts)


def assert_clean(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


def table_exists(db: Path, table: str) -> bool:
    with duckdb.connect(str(db), read_only=True) as con:
        return bool(
            con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0]
        )


@pytest.mark.parametrize("title", list(PAGES))
def test_every_page_renders_on_an_empty_database(empty_db: Path, title: str) -> None:
    app = open_page(title)
    assert_clean(app)
    assert app.title[0].value in (title, "Run a profile")
    assert not empty_db.exists()  # looking never creates the database


@pytest.mark.parametrize("title", ["Compare instances", "Models"])
def test_an_empty_page_says_where_in_the_dashboard_to_make_what_it_shows(empty_db: Path, title: str) -> None:
    # it named command-line flags alone ("label each with --instance")
    app = open_page(title)
    said = " ".join(info.value for info in app.info)
    assert "Run page" in said and "--instance" not in said
    links = [link.proto.page for link in app.get("page_link")]
    assert "run" in links, links


@pytest.mark.parametrize("title", list(PAGES))
def test_every_page_renders_on_a_populated_database(populated_db: Path, title: str) -> None:
    app = open_page(title)
    assert_clean(app)
    if title in ("Overview", "Stall breakdown", "Compare instances"):
        assert charts(app), f"{title} shows no chart"
        assert app.get("download_button"), f"{title} offers no chart data download"


def test_overview_counts_what_the_database_holds(populated_db: Path) -> None:
    app = open_page("Overview")
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["Runs"] == "5"
    assert metrics["Completed"] == "4"
    assert metrics["Models"] == "2"
    assert metrics["Instances"] == "2"
    # the last run's age ("13 days ago") gets two columns' width: one cut it to "13 days a…" at 1400 px
    weights = [column.proto.weight for column in app.columns[:5]]
    assert weights[4] == 2 * weights[0] and metrics["Last run"].endswith(" ago")


def test_empty_database_offers_the_examples_and_imports_them(empty_db: Path) -> None:
    shipped = examples.example_result_files()
    assert shipped, "examples/results/ holds no example result files"
    app = open_page("Overview")
    button = app.button(key="import-examples")
    assert not button.disabled
    button.click().run()
    assert_clean(app)
    assert run_count(empty_db) == len(shipped)
    assert charts(app)  # the page now shows the breakdowns of the imported runs


def test_breakdown_filters_runs_and_shows_one_in_detail(populated_db: Path) -> None:
    app = open_page("Stall breakdown")
    app.multiselect(key="bd-models").set_value(["vgg11"]).run()
    assert_clean(app)
    assert "1 of 1 matching run" in texts(app)
    assert app.selectbox(key="bd-run").value == "20261121T090000Z-cccc0004"
    for section in ("Iteration times", "Telemetry", "Phases", "Machine and spec", "What if", "Stalls"):
        app.button_group(key="bd-section").set_value(section).run()
        assert_clean(app)
        if section in ("Iteration times", "Telemetry"):
            assert charts(app), section
        if section == "What if":
            labels = [metric.label for metric in app.metric]
            assert "CPU cores" in labels and "Memory cache" in labels


def test_breakdown_opens_a_failed_run_from_the_link_with_its_reason(populated_db: Path) -> None:
    app = open_page("Stall breakdown", {"run": "20261121T100000Z-dddd0005"})
    assert not app.exception
    assert any("worker 1 exited" in e.value for e in app.error)


def test_breakdown_per_epoch_and_share_views(populated_db: Path) -> None:
    app = open_page("Stall breakdown")
    for measure in ("epoch_s", "share", "seconds"):
        app.button_group(key="bd-measure").set_value(measure).run()
        assert_clean(app)
        assert charts(app)


def test_compare_names_the_fastest_and_the_cheapest(populated_db: Path) -> None:
    app = open_page("Compare instances")
    assert_clean(app)
    pick = app.selectbox(key="cmp-pick")
    assert pick.index == 0 and pick.format_func(pick.value).startswith("resnet18 · batch 32 per worker")
    shown = texts(app)
    # big-vm: 0.22 s per iteration at 0.40 USD/h; small-vm: ~0.45 s at 0.10 USD/h.
    fastest = shown.split("Fastest")[1].split("Cheapest")[0]
    cheapest = shown.split("Cheapest")[1]
    assert "big-vm" in fastest.split("\n")[1]
    assert "small-vm" in cheapest.split("\n")[1]
    assert "cheaper" in cheapest


def test_the_picked_job_stays_when_runs_stored_meanwhile_reorder_the_list(populated_db: Path) -> None:
    """The Job picker kept a place in the list: two vgg11 runs on new instances moved vgg11 first, and the
    page showed resnet18's comparison under the vgg11 label."""
    from result_docs import result_doc

    from stash_core import store

    app = open_page("Compare instances")
    pick = app.selectbox(key="cmp-pick")
    import json

    from stash_core import views

    choices = views.compare.compare_choices(populated_db).to_dict("records")
    jobs = [views.compare.job_of(row) for row in choices]
    keys = [json.dumps(job, sort_keys=True, default=str) for job in jobs]  # the picker's values
    vgg = next(key for key, job in zip(keys, jobs, strict=True) if job["model"] == "vgg11")
    assert keys.index(vgg) > 0  # not first, until the runs below
    pick.set_value(vgg).run()
    for instance in ("vm-a", "vm-b"):
        assert store.ingest_result(populated_db, result_doc("vgg11", batch_size=16, instance=instance))
    from pages._shared import forget_cached_queries

    forget_cached_queries()
    app.run()
    assert_clean(app)
    pick = app.selectbox(key="cmp-pick")
    assert pick.format_func(pick.value).startswith("vgg11 · batch 16"), (vgg, pick.options)
    shown = texts(app)
    assert "vm-a" in shown and "vm-b" in shown  # this job's instances


def test_run_form_refuses_bad_input_and_starts_nothing(empty_db: Path) -> None:
    app = open_page("Run")
    app.radio(key="run-data").set_value("dataset").run()
    app.text_input(key="run-dataset").input("/no/such/folder").run()
    app.button(key="run-start").click().run()
    assert not app.exception
    assert [shown(e.value) for e in app.error] == ["Data set: no folder /no/such/folder"]
    assert jobs.list_jobs(empty_db) == []

    app.radio(key="run-data").set_value("none").run()
    # without real data the stalls offered are those it can measure: CPU and disk were kept, then refused
    assert app.button_group(key="run-stalls-1-1-0").value == ["compute"]

    app.radio(key="run-model-src").set_value("file").run()
    app.text_input(key="run-model-file").input("missing_model.py:make").run()
    app.button(key="run-start").click().run()
    assert shown(app.error[0].value).startswith("Model: no file")
    assert jobs.list_jobs(empty_db) == []


def test_run_form_keeps_the_stalls_chosen_when_the_workers_change(empty_db: Path) -> None:
    """Disk fetch, deselected with one worker, came back when the workers were set to 2."""
    app = open_page("Run")
    app.radio(key="run-data").set_value("synthetic").run()
    assert app.button_group(key="run-stalls-1-1-1").value == ["compute", "cpu", "disk"]
    app.button_group(key="run-stalls-1-1-1").set_value(["compute", "cpu"]).run()
    app.number_input(key="run-workers").set_value(2).run()
    assert app.button_group(key="run-stalls-2-1-1").value == ["compute", "interconnect", "cpu"]  # one added
    app.radio(key="run-data").set_value("none").run()  # CPU and disk need real data: dropped
    assert app.button_group(key="run-stalls-2-1-0").value == ["compute", "interconnect"]
    assert not app.exception


def test_run_form_offers_the_specs_bounds_and_defaults(empty_db: Path) -> None:
    """The Run page's numbers come from the spec's one table of options: its ranges (said in the help and
    checked on Start: a bounded input would start with its last value in range) and its defaults."""
    app = open_page("Run")
    assert not app.exception
    fields = {"run-batch": "batch_size", "run-workers": "workers_per_node", "run-nodes": "nodes",
              "run-images": "synthetic_images", "run-maxs": "max_phase_s", "run-image-px": "image_px",
              "run-loader": "loader_workers"}  # fmt: skip
    for key, attr in fields.items():
        field = app.number_input(key=key)
        low, high = number_range(attr)
        assert (field.min, field.max) == (None, None) and f"{low:,} to {high:,}" in field.help, key
    assert f"to {int(BATCH_SIZE.high):,}" in app.number_input(key="run-batch").help
    assert app.number_input(key="run-workers").value == default_of("workers_per_node")
    assert app.number_input(key="run-maxs").value == default_of("max_phase_s")
    assert app.text_input(key="run-iterations").value == default_of("iterations")


def test_run_form_offers_a_training_script_and_names_a_missing_one(empty_db: Path) -> None:
    app = open_page("Run")
    app.radio(key="run-model-src").set_value("script").run()
    app.text_input(key="run-script").input("no_such_train.py").run()
    app.text_input(key="run-script-args").input("--epochs 1").run()
    app.button(key="run-start").click().run()
    assert not app.exception
    assert shown(app.error[0].value).startswith("Script: no file")
    assert jobs.list_jobs(empty_db) == []


def test_run_page_follows_a_job_from_its_files(empty_db: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/sh\n"
        'echo \'STASH-PHASE {"event": "started", "index": 0, "total": 2, "name": "R0", '
        '"description": "1 worker, synthetic data on the device"}\'\n'
        'echo \'STASH-PROGRESS {"phase": "R0", "iterations": 12, "kept": 10, "relative_ci": 0.05, '
        '"fraction_done": 0.4}\'\n'
        "echo 'stash: phase R1 failed: worker 1 exited with code 1' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    job_id = jobs.start_profile_job(empty_db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    assert jobs.wait_for_job(empty_db, job_id, timeout_s=30).finished
    app = open_page("Run", {"job": job_id})
    assert not app.exception
    assert [shown(e.value) for e in app.error] == ["phase R1 failed: worker 1 exited with code 1"]
    assert any("R0" in str(p.proto.text) for p in app.get("progress"))


def test_run_page_cancels_a_running_job(empty_db: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/sh\n"
        'echo \'STASH-PHASE {"event": "started", "index": 0, "total": 1, "name": "R0", '
        '"description": "1 worker"}\'\n'
        "sleep 300\n"
    )
    fake.chmod(0o755)
    job_id = jobs.start_profile_job(empty_db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    deadline = time.monotonic() + 20
    while jobs.read_job(empty_db, job_id).status != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    app = open_page("Run")  # the running job is found without a link
    assert_clean(app)
    assert app.button(key="run-start").disabled  # one profile at a time
    app.button(key=f"cancel-{job_id}").click().run()
    assert not app.exception
    assert jobs.read_job(empty_db, job_id).status == "cancelled"
    assert not app.button(key="run-start").disabled


def test_upload_rejects_a_malformed_file_and_stores_a_good_one(populated_db: Path) -> None:
    good = result_doc(
        "mobilenet_v2",
        run_id="20261122T080000Z-eeee0006",
        instance="big-vm",
        samples=True,
        telemetry=True,
        seed=6,
    )
    foreign = {"kind": "something-else", "run_id": "x"}
    app = open_page("Upload")
    app.file_uploader[0].set_value(
        [
            ("good.json", json.dumps(good).encode(), "application/json"),
            ("broken.json", b'{"schema_version": 1, "kind": "stash-profile", "run_id": ', "application/json"),
            ("foreign.json", json.dumps(foreign).encode(), "application/json"),
        ]
    ).run()
    assert not app.exception
    errors = [e.value for e in app.error]
    assert len(errors) == 2
    assert any("broken.json" in e and "not valid JSON" in e for e in errors)
    assert any("foreign.json" in e and "not a Stash result file" in e for e in errors)
    assert any("good.json" in s.value for s in app.success)
    assert charts(app)  # compared in the session before anything is stored
    assert run_count(populated_db) == 5

    app.button(key="upload-store").click().run()
    assert not app.exception
    assert run_count(populated_db) == 6
    # the refused files are still said once the good one is stored (they were forgotten)
    said = [shown(s.value) for s in app.success]
    assert "Stored 1 run(s) from 1 file(s); 2 refused file(s) were left out." in said, said
    with duckdb.connect(str(populated_db), read_only=True) as con:
        stored = {row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()}
    assert "20261122T080000Z-eeee0006" in stored and "x" not in stored


def test_an_upload_into_a_database_not_made_yet_names_it_and_its_new_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped path stored into a new folder tree with no more than "Stored 1 run(s)"."""
    database = tmp_path / "typo" / "deeper" / "x.duckdb"
    monkeypatch.setenv("STASH_DB", str(database))
    app = open_page("Upload")
    doc = result_doc("resnet18", run_id="20261122T080000Z-eeee0007")
    app.file_uploader[0].set_value([("good.json", json.dumps(doc).encode(), "application/json")]).run()
    words = f"{database} · not created yet (the first run creates it, and the folder {tmp_path / 'typo'})"
    assert any(words in shown(c.value) for c in app.sidebar.caption), [c.value for c in app.sidebar.caption]
    assert app.button(key="upload-store").label == "Store 1 new run(s) in a new database"
    app.button(key="upload-store").click().run()
    assert not app.exception
    said = [shown(s.value) for s in app.success]
    assert f"Stored 1 run(s) from 1 file(s) in a new database, {database}." in said, said
    assert run_count(database) == 1


def test_upload_of_only_bad_files_offers_nothing_to_store(populated_db: Path) -> None:
    app = open_page("Upload")
    app.file_uploader[0].set_value(("notes.csv", b"a,b\n1,2\n", "text/csv")).run()
    assert not app.exception
    assert "not a Stash export" in shown(app.error[0].value)
    assert not [b for b in app.button if b.key == "upload-store"]
    assert run_count(populated_db) == 5


def test_sql_returns_rows_for_a_select(populated_db: Path) -> None:
    app = open_page("SQL")
    app.text_area(key="sql-text").input("SELECT run_id, model FROM runs ORDER BY run_id")
    app.button[[b.label for b in app.button].index("Run query")].click().run()
    assert_clean(app)
    frame = app.dataframe[-1].value
    assert list(frame.columns) == ["run_id", "model"]
    assert len(frame) == 5


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [("sql-max-rows", 0, "Row limit: must be from 1 to 100,000, got 0"),
     ("sql-timeout", 301, "Time limit (s): must be from 1 to 300, got 301")],
)  # fmt: skip
def test_a_limit_out_of_range_is_named_and_the_last_result_is_not_left_under_another_query(
    populated_db: Path, key: str, value: int, said: str
) -> None:
    """The browser kept the number out of the form: Run query did nothing, the last query's rows stayed."""
    app = open_page("SQL")
    app.text_area(key="sql-text").input("SELECT run_id, model FROM runs ORDER BY run_id")
    app.button[[b.label for b in app.button].index("Run query")].click().run()
    app.number_input(key=key).set_value(value)
    app.text_area(key="sql-text").input("SELECT 42 AS answer")
    app.button[[b.label for b in app.button].index("Run query")].click().run()
    assert not app.exception
    assert said in shown(app.error[0].value)
    assert not any("model" in frame.value.columns for frame in app.dataframe)


def test_sql_refuses_drop_table_runs_and_the_table_stays(populated_db: Path) -> None:
    app = open_page("SQL")
    app.text_area(key="sql-text").input("DROP TABLE runs")
    app.button[[b.label for b in app.button].index("Run query")].click().run()
    assert not app.exception
    assert "DROP" in shown(app.error[0].value) and "read-only" in shown(app.error[0].value)
    assert table_exists(populated_db, "runs")
    assert run_count(populated_db) == 5


def test_a_bad_database_path_is_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STASH_DB", str(tmp_path))  # a folder
    app = open_page("Overview")
    assert not app.exception
    assert any("is a folder" in e.value for e in app.error)
    not_duckdb = tmp_path / "notes.duckdb"
    not_duckdb.write_text("hello")
    monkeypatch.setenv("STASH_DB", str(not_duckdb))
    app = open_page("Overview")
    assert not app.exception
    assert any("cannot open database" in e.value for e in app.error)
    monkeypatch.setenv("STASH_DB", str(not_duckdb / "x.duckdb"))  # below a file
    app = open_page("Overview")
    assert not app.exception
    assert any("is a file, not a folder" in shown(e.value) for e in app.error), [e.value for e in app.error]
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    monkeypatch.setenv("STASH_DB", str(tmp_path / "loop1"))  # resolve() raised RuntimeError: a traceback
    app = open_page("Overview")
    assert not app.exception, [e.value for e in app.exception]
    assert any("is a symlink loop" in shown(e.value) for e in app.error), [e.value for e in app.error]
    # spaces only, a control character, bytes that are not UTF-8 (each page's traceback before)
    for bad in ("   ", f"{tmp_path}/\x1b[31m.duckdb", f"{tmp_path}/a\udcff.duckdb"):
        monkeypatch.setenv("STASH_DB", bad)
        app = open_page("Overview")
        assert not app.exception, [e.value for e in app.exception]
        assert any("STASH_DB" in shown(e.value) for e in app.error), [e.value for e in app.error]


@pytest.mark.parametrize("title", ["Overview", "SQL"])
def test_another_programs_database_is_refused_in_the_dashboards_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, title: str
) -> None:
    """The dashboard has no --db: its message names the sidebar's Database file instead."""
    foreign = tmp_path / "other.duckdb"
    with duckdb.connect(str(foreign)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    monkeypatch.setenv("STASH_DB", str(foreign))
    app = open_page(title)
    assert not app.exception
    said = [shown(e.value) for e in app.error if "not Stash's" in shown(e.value)]
    assert said and all("choose another Database file in the sidebar" in e for e in said), said
    assert not any("--db" in e for e in said), said


def test_a_database_path_that_cannot_be_made_says_so_in_the_sidebar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file under missing folders was said not to be creatable, though the first write makes them; one in
    a folder not this user's to write was said to be creatable."""
    monkeypatch.setenv("STASH_DB", str(tmp_path / "no-such-folder" / "deeper" / "x.duckdb"))
    with monkeypatch.context() as patched:
        patched.setattr(os, "access", lambda path, mode: False)  # as root, every folder is writable
        app = open_page("Overview")
    assert not app.exception
    assert any(f"cannot be created: the folder {tmp_path} is not writable" in shown(w.value)
               for w in app.sidebar.warning), [w.value for w in app.sidebar.warning]  # fmt: skip
    app = open_page("Overview")
    assert not app.sidebar.warning
    words = "not created yet (the first run creates it, and the folder "
    assert any(words in c.value for c in app.sidebar.caption)


def test_the_app_holds_no_connection_while_stash_ingest_writes(populated_db: Path, tmp_path: Path) -> None:
    app = open_page("Overview")
    assert {m.label: m.value for m in app.metric}["Runs"] == "5"
    new = tmp_path / "new.json"
    doc = result_doc(
        run_id="20261122T120000Z-ffff0007", instance="small-vm", samples=True, telemetry=True, seed=7
    )
    new.write_text(json.dumps(doc))
    env = {**os.environ, "PYTHONPATH": str(REPO), "STASH_DB": str(populated_db)}
    ingest = subprocess.Popen([sys.executable, "-m", "stash_core", "ingest", str(new)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    app.run()  # the page reads while the ingest writes; neither may fail
    out, err = ingest.communicate(timeout=120)
    assert ingest.returncode == 0, err
    assert "stored" in out
    assert not app.exception
    app.run()  # a refresh shows the new run
    assert {m.label: m.value for m in app.metric}["Runs"] == "6"


def test_runs_the_per_epoch_chart_cannot_draw_are_said(populated_db: Path) -> None:
    """Runs without an epoch length vanished from the chart while the caption counted them."""
    from result_docs import result_doc

    from stash_core import store

    store.ingest_result(populated_db, result_doc(run_id="20261122T090000Z-eeee0006", dataset_images=None))
    app = open_page("Stall breakdown")
    app.button_group(key="bd-measure").set_value("epoch_s").run()
    assert_clean(app)
    said = [c.value for c in app.caption if "are not drawn" in c.value]
    assert len(said) == 1 and said[0].endswith("they have no epoch length (no data set size).")
