"""The Run page in AppTest: what its form starts is what it shows, and what the profile would refuse (or
the launcher fail on) is refused in the form, before any job exists."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from support import REPO, shown

from stash_core.engine import jobs
from stash_core.engine.paired import PAIRED_OFF_HINT

PAGE = REPO / "pages" / "run.py"


@pytest.fixture()
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv of each profile the page starts (none is launched)."""
    argvs: list[list[str]] = []
    monkeypatch.setattr(jobs, "start_profile_job", lambda db, args, label="": argvs.append(args) or "job1")
    return argvs


def _page(db: Path) -> AppTest:
    app = AppTest.from_file(str(PAGE), default_timeout=90)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _with_the_zoo(app: AppTest) -> AppTest:
    """The page once its background listing of the zoo is done (until then it offers resnet18 alone: the
    first test of a process to pick another model raced the listing)."""
    deadline = time.monotonic() + 60
    while len(app.selectbox(key="run-zoo-model").options) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        app = app.run()
    return app


def _start(app: AppTest) -> AppTest:
    return app.button(key="run-start").click().run()


def test_the_defaults_start_a_profile_that_measures_what_one_worker_can(empty_db, started):
    app = _page(empty_db)
    assert app.get("button_group")[0].value == ["compute", "cpu", "disk"]
    app = _start(app)
    assert not app.exception and not app.error
    assert started == [["--model", "resnet18", "--batch-size", "32", "--stalls", "compute,cpu,disk",
                        "--synthetic-images", "512"]]  # fmt: skip


def test_the_readmes_first_profile_can_be_made_in_the_form(empty_db, started):
    # the README's example generates 64 px images; the form had no field for their size (256 px then)
    app = _with_the_zoo(_page(empty_db))
    app.selectbox(key="run-zoo-model").set_value("resnet10").run()
    for key, value in {"run-batch": 16, "run-workers": 2, "run-images": 256, "run-image-px": 64,
                       "run-loader": 1, "run-maxs": 40, "run-target": 10.0}.items():  # fmt: skip
        app.number_input(key=key).set_value(value).run()
    app.text_input(key="run-shape").input("3,32,32").run()
    app = _start(app)
    assert not app.exception and not app.error
    args = started[0]
    options = dict(zip(args[::2], args[1::2]))
    assert options["--image-px"] == "64" and options["--synthetic-images"] == "256"
    assert options["--loader-workers"] == "1" and options["--input-shape"] == "3,32,32"


def test_a_data_set_folder_takes_loader_processes_and_no_image_size(empty_db, started, tmp_path):
    data = tmp_path / "data"
    (data / "cats").mkdir(parents=True)
    app = _page(empty_db)
    app.radio(key="run-data").set_value("dataset").run()
    assert not [field for field in app.number_input if field.key == "run-image-px"]
    app.text_input(key="run-dataset").set_value(str(data)).run()
    app.number_input(key="run-loader").set_value(0).run()
    app = _start(app)
    assert not app.exception and not app.error
    assert "--loader-workers" in started[0] and "--image-px" not in started[0]


def test_a_stall_the_setup_cannot_measure_is_refused_in_the_form(empty_db, started):
    app = _page(empty_db)
    app.get("button_group")[0].set_value(["compute", "interconnect"]).run()
    app = _start(app)
    assert not app.exception and started == []
    assert "interconnect needs 2 or more workers per machine" in shown(app.error[0].value)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("run-batch", 0, "Batch size (per worker) must be a whole number of at least 1"),
        ("run-batch", -4, "Batch size (per worker) must be a whole number of at least 1"),
        ("run-maxs", 0, "Time limit per phase must be positive"),
        ("run-images", 0, "Number of images must be a whole number of at least 1"),
        ("run-image-px", 4, "Image side (px) must be a whole number from 8 to 8192"),
        ("run-loader", -1, "Loader processes per worker must be a whole number of at least 0"),
        # too large: each field by its label (it was "Workers", "Synthetic images"), not by the flag --workers
        ("run-workers", 100_000, "Workers per machine: must be at most 1,024"),
        ("run-images", 10**9, "Number of images: must be at most 100,000,000"),
        ("run-batch", 10**9, "Batch size (per worker): must be at most"),
    ],
)
def test_a_number_out_of_range_is_refused_not_replaced(empty_db, started, key, value, said):
    app = _page(empty_db)
    app.number_input(key=key).set_value(value).run()
    app = _start(app)
    assert not app.exception and started == []
    assert said in shown(app.error[0].value)


@pytest.mark.parametrize("hosts", [":22", "127.0.0.1:99999", "-F@127.0.0.1"])
def test_a_host_the_launcher_would_refuse_is_refused_in_the_form(empty_db, started, hosts):
    app = _page(empty_db)
    app.radio(key="run-where").set_value("hosts").run()
    app.text_input(key="run-hosts").input(hosts).run()
    app = _start(app)
    assert not app.exception and started == []
    assert shown(app.error[0].value).startswith("Remote hosts:")


def test_an_instance_label_that_reads_as_an_option_is_refused(empty_db, started):
    app = _page(empty_db)
    app.text_input(key="run-instance").input("--no-store").run()
    app = _start(app)
    assert not app.exception and started == []
    assert "not starting with -" in shown(app.error[0].value)


def test_the_stalls_offered_follow_the_workers_and_machines(empty_db, started):
    app = _page(empty_db)
    app.number_input(key="run-workers").set_value(2).run()
    assert app.get("button_group")[0].value == ["compute", "interconnect", "cpu", "disk"]
    app.number_input(key="run-workers").set_value(1).run()
    assert app.get("button_group")[0].value == ["compute", "cpu", "disk"]


@pytest.mark.parametrize(("source", "key"), [("upload", "run-model-upload"), ("script", "run-script-upload")])
def test_an_invalid_python_upload_is_said_under_its_uploader(empty_db, started, source, key):
    app = _page(empty_db)
    app.radio(key="run-model-src").set_value(source).run()
    if source == "script":
        app.radio(key="run-script-src").set_value("upload").run()
    app.get("file_uploader")[0].set_value(("bad.py", b"def make(:\n", "text/x-python")).run()
    assert not app.exception
    assert "bad.py: not valid Python (SyntaxError" in shown(app.error[0].value)
    assert app.button(key="run-start") and app.number_input(key="run-workers")  # the rest of the form
    app = _start(app)
    assert not app.exception and started == []


def test_progress_counts_the_measured_iterations_apart_from_the_warm_up(empty_db, tmp_path):
    fake = tmp_path / "fake-python"
    phase = {"event": "started", "index": 0, "total": 3, "name": "R0", "description": "1 worker"}
    progress = {"phase": "R0", "iterations": 32, "kept": 20, "max_iterations": 99, "target_relative_ci": 0.1}
    paired = {"event": "message", "text": f"R0 and R1 timed together{PAIRED_OFF_HINT}"}  # as the profile says
    fake.write_text(
        f"#!/bin/sh\necho 'STASH-PHASE {json.dumps(phase)}'\necho 'STASH-PROGRESS {json.dumps(progress)}'\n"
        f"echo 'STASH-PHASE {json.dumps(paired)}'\nsleep 300\n"
    )
    fake.chmod(0o755)
    job_id = jobs.start_profile_job(empty_db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    try:
        deadline = time.monotonic() + 20
        while not jobs.read_job(empty_db, job_id).phases and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)
        app = _page(empty_db)
        text = " ".join(str(p.proto.text) for p in app.get("progress"))
        assert "20 iterations measured, 12 warm-up" in text and "32 iterations" not in text
        # the launch of a round, not "(1/3)" beside the rounds' lines; no flag the page has no field for
        assert "1 worker · launch 1 of 3 in a round" in text and "(1/3)" not in text
        captions = [caption.value for caption in app.caption]
        assert any("timed together" in caption for caption in captions), captions
        assert not any("--paired" in caption for caption in captions), captions
    finally:
        jobs.cancel_job(empty_db, job_id, grace_s=1.0)


def test_a_phases_error_is_shown_as_text_in_its_progress_bar(empty_db, tmp_path):
    """A worker's error in a phase's bar rendered as markdown: bold, colours, LaTeX, a link to click."""
    fake = tmp_path / "fake-python"
    hostile = "**BOLD** :red[RED] $x^2$ [link](http://evil.example)"
    started = {"event": "started", "index": 0, "total": 1, "name": "R0", "description": "1 worker"}
    failed = {"event": "finished", "name": "R0", "status": "failed", "error": f"ValueError: {hostile}"}
    lines = "".join(f"echo '{marker} {json.dumps(event)}'\n" for marker, event in
                    (("STASH-PHASE", started), ("STASH-PHASE", failed)))  # fmt: skip
    fake.write_text(f"#!/bin/sh\n{lines}sleep 300\n")
    fake.chmod(0o755)
    job_id = jobs.start_profile_job(empty_db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    try:
        deadline = time.monotonic() + 20
        failed = lambda: any(phase.error for phase in jobs.read_job(empty_db, job_id).phases)  # noqa: E731
        while not failed() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = " ".join(str(p.proto.text) for p in _page(empty_db).get("progress"))
        assert "R0" in text and "evil.example" in text
        assert "**BOLD**" not in text and "[link](http" not in text and ":red[" not in text, text
    finally:
        jobs.cancel_job(empty_db, job_id, grace_s=1.0)


def test_a_jobs_folder_of_another_user_is_said_on_the_page(empty_db, monkeypatch):
    """Its jobs were hidden without a word (list_jobs gave none), and a Start failed only then."""
    import os

    jobs.jobs_dir(empty_db).mkdir()
    monkeypatch.setattr(os, "getuid", lambda: os.geteuid() + 1)
    app = _page(empty_db)
    assert not app.exception
    assert any("another user" in warning.value for warning in app.warning)


def test_a_running_job_found_by_the_page_stays_shown_once_it_ends(empty_db, tmp_path):
    """Opened without ?job=, the page showed the running profile it found, and lost it when it ended (the
    form alone, no result): the job it shows is now in the address."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\nsleep 300\n")
    fake.chmod(0o755)
    job_id = jobs.start_profile_job(empty_db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    try:
        app = _page(empty_db)
        assert app.query_params.get("job") in (job_id, [job_id])
    finally:
        jobs.cancel_job(empty_db, job_id, grace_s=1.0)
    assert jobs.read_job(empty_db, job_id).finished
    app.run()
    said = " ".join(shown(block.value) for block in app.markdown)
    assert f"Cancelled — profile · job {job_id}" in said, said
    # a user's cancel is no failure: no error badge or box (it read as one, in red)
    assert not [element for element in app.main if type(element).__name__ == "Status"]
    assert not app.error and "Cancelled, as asked." in [info.value for info in app.info]


def test_several_workers_may_find_unused_parameters(empty_db, started):
    # a model that uses some parameters on some steps only could not be profiled from the page on 2 workers
    app = _page(empty_db)
    assert not app.get("checkbox") or all(box.key != "run-unused" for box in app.checkbox)  # one worker
    app.number_input(key="run-workers").set_value(2).run()
    app.checkbox(key="run-unused").check().run()
    app = _start(app)
    assert not app.exception and "--find-unused-parameters" in started[0], started


def test_a_finished_run_shows_its_warnings_beside_its_breakdown(empty_db, monkeypatch):
    """The Finished panel said only "finished and is stored" under a breakdown at ± 140% with a stall not
    resolved: the run's warnings were on the Stall breakdown page alone."""
    from stash_core import store
    from stash_core.engine.job_state import JobState

    doc = json.loads(next((REPO / "examples" / "results").glob("*.json")).read_text())
    doc["breakdown"]["warnings"] = ["cpu: ± 140% after 3 rounds (target ± 10%)"]
    store.ingest_result(empty_db, doc)
    done = JobState("job9", empty_db.parent, [], None, None, "completed", 0, run_id=doc["run_id"])
    monkeypatch.setattr(jobs, "read_job", lambda db, job_id: done)
    monkeypatch.setattr(jobs, "list_jobs", lambda db, limit=8: [done])
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)  # the app: the page links others
    app.query_params["job"] = "job9"
    app.run()
    app.switch_page("pages/run.py").run()
    assert not app.exception
    boxes = [shown(box.value) for box in app.warning]
    assert any(box.startswith("1 warning(s):") and "± 140% after 3 rounds" in box for box in boxes), boxes


def test_a_form_refused_under_a_failed_jobs_view_is_said_alone(empty_db, monkeypatch, started):
    """A failed job shown by ?job= kept its "--workers 500" failure at the top while the batch size the user
    had just typed was refused at the bottom: two errors, one of them stale."""
    from stash_core.engine.job_state import JobState

    failed = JobState("job7", empty_db.parent, [], None, None, "failed", 1, error="--workers 500: too many")
    monkeypatch.setattr(jobs, "read_job", lambda db, job_id: failed)
    monkeypatch.setattr(jobs, "list_jobs", lambda db, limit=8: [failed])
    app = AppTest.from_file(str(PAGE), default_timeout=90)
    app.session_state["stash_db_path"] = str(empty_db)
    app.query_params["job"] = "job7"
    app.run()
    assert "Workers per machine 500: too many" in " ".join(shown(box.value) for box in app.error)
    app.number_input(key="run-batch").set_value(0)
    _start(app)
    errors = [shown(box.value) for box in app.error]
    assert errors == ["Batch size (per worker) must be a whole number of at least 1"], errors
    assert not app.query_params.get("job") and started == []


def test_a_database_the_profile_would_refuse_is_refused_before_a_job_exists(tmp_path, started):
    """A database inside the data set read started a job that failed, its job folder made inside the user's
    data set; a result file given as the database started one too."""
    data = tmp_path / "ds"
    (data / "cats").mkdir(parents=True)
    (data / "cats" / "a.jpg").write_bytes(b"x")
    app = _page(data / "inside.duckdb")
    app.radio(key="run-data").set_value("dataset").run()
    app.text_input(key="run-dataset").set_value(str(data)).run()
    app = _start(app)
    assert not app.exception and started == []
    said = shown(app.error[0].value)
    assert said.startswith(f"Database file {data / 'inside.duckdb'} is inside Data set folder {data}"), said
    assert not (data / ".stash-jobs").exists() and not (data / "inside.duckdb").exists()
    from stash_core.cli.main import profile_refusal

    victim = tmp_path / "victim.json"
    victim.write_text('{"run_id": "r1"}')
    job = ["--model", "resnet18", "--batch-size", "8"]
    assert "not a DuckDB database" in profile_refusal(job, victim)
    assert profile_refusal(job, tmp_path / "new.duckdb") is None
    assert victim.read_text() == '{"run_id": "r1"}' and not (tmp_path / "new.duckdb").exists()
    # a script's own arguments follow "--": the database is checked as the job will be given it, before them
    (tmp_path / "train.py").write_text("print('training')\n")
    script = ["--script", str(tmp_path / "train.py"), "--data-dir", str(data), "--", "--epochs", "1"]
    said = profile_refusal(script, data / "in.duckdb") or ""
    assert said.startswith(f"--db {data / 'in.duckdb'} is inside --data-dir {data}"), said


def test_choosing_the_emulated_cluster_says_at_once_that_it_takes_two_machines(empty_db, started):
    app = _page(empty_db)
    app.radio(key="run-where").set_value("cluster").run()
    assert any("It takes Machines (nodes) 2 or more" in caption.value for caption in app.caption)
    app.number_input(key="run-nodes").set_value(2).run()
    assert not any("It takes Machines (nodes)" in caption.value for caption in app.caption)
