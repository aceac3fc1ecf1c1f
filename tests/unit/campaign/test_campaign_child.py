"""The Campaign page's launch: the campaign runs in the background as a job of its own kind (the Run page
and the Overview list profiles only), through campaign/child.py, which plans, refuses and runs as the
command does; its output is the job's log, and Stop interrupts it as Ctrl-C would."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from fake_skypilot import install_fake_skypilot

from stash_core.campaign import child
from stash_core.engine import jobs
from stash_core.views import campaign as view
from stash_core.views.campaign import CampaignRequest

REQUEST = CampaignRequest(instances=("g5.xlarge", "g4dn.xlarge"), models=("resnet18",), batch_sizes=(32,),
                          iterations="20")  # fmt: skip


def options(db: Path, **changes) -> dict:
    base = {"db": str(db), "instances": ["g5.xlarge"], "models": ["resnet18"], "batch_sizes": [32],
            "spot": False, "region": None, "budget_usd": None, "iterations": "20", "parallel": 1,
            "idle_minutes": 15}  # fmt: skip
    return {**base, **changes}


def run_child(tmp_path: Path, capsys, request: dict | str) -> tuple[int, str, str]:
    path = tmp_path / "request.json"
    path.write_text(request if isinstance(request, str) else json.dumps(request))
    capsys.readouterr()
    code = child.main([str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def wait_finished(db: Path, job_id: str, timeout_s: float = 120.0) -> jobs.JobState:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = jobs.read_job(db, job_id)
        if state.finished:
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {jobs.read_job(db, job_id).status} after {timeout_s} s")


@pytest.fixture
def fake_skypilot(tmp_path, monkeypatch) -> Path:
    """A stand-in SkyPilot for this process and its children, whose launches find no capacity."""
    folder = install_fake_skypilot(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.setenv("FAKE_SKY_LOG", str(tmp_path / "sky.log"))
    return tmp_path / "sky.log"


@pytest.mark.parametrize(
    ("request_text", "says"),
    [
        ("not json", "campaign request"),
        (json.dumps({"db": "x"}), "missing instances"),
    ],
    ids=["not-json", "missing-keys"],
)
def test_a_bad_request_is_one_line(tmp_path, capsys, request_text, says):
    code, out, err = run_child(tmp_path, capsys, request_text)
    assert code == 2 and says in err and len(err.splitlines()) == 1 and not out


def test_the_child_refuses_as_the_command_does(tmp_path, capsys):
    db = tmp_path / "runs.duckdb"
    code, _, err = run_child(tmp_path, capsys, options(db, budget_usd=0.01))
    assert code == 2 and "above --budget-usd" in err and len(err.splitlines()) == 1
    code, _, err = run_child(tmp_path, capsys, options(db, instances=["no-such-type"]))
    assert code == 2 and "no-such-type" in err


def test_a_launch_the_cloud_refuses_ends_the_job_with_the_reason(tmp_path, fake_skypilot):
    db = tmp_path / "runs.duckdb"
    job_id = view.launch(db, REQUEST)
    assert jobs.list_jobs(db) == []  # not a profile: the Run page and the Overview do not list it
    state = wait_finished(db, job_id)
    assert state.kind == "campaign" and state.status == "failed" and state.exit_code == 1
    started = view.campaign_jobs(db)
    assert list(started["job_id"]) == [job_id] and not started.iloc[0]["running"]
    log = started.iloc[0]["log"]
    assert "launch failed: ResourcesUnavailableError: no capacity" in log
    assert "cloud campaign: 0 profiled, 0 failed, 2 not finished" in log
    launched = [line for line in fake_skypilot.read_text().splitlines() if line.startswith("launch ")]
    assert len(launched) == 2  # each instance type asked for once


def test_without_skypilot_nothing_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(view, "skypilot_installed", lambda: False)
    with pytest.raises(view.UsageError, match="requirements-cloud.txt"):
        view.launch(tmp_path / "runs.duckdb", REQUEST)
    assert not (tmp_path / ".stash-jobs").exists()


def test_stop_interrupts_a_running_command_job(tmp_path):
    db = tmp_path / "runs.duckdb"
    script = "import time, signal, sys\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('torn down')\n    sys.exit(130)\n"  # noqa: E501
    job_id = jobs.start_command_job(db, [sys.executable, "-c", script], "sleeper", "campaign")
    deadline = time.monotonic() + 30
    while jobs.read_job(db, job_id).status != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the interpreter has started its sleep
    assert jobs.stop_job(db, job_id)
    state = wait_finished(db, job_id, 30)
    assert state.status == "cancelled" and "torn down" in "\n".join(state.output_tail)
    assert not jobs.stop_job(db, job_id)  # finished: nothing to stop
    with pytest.raises(view.UsageError):
        jobs.start_command_job(db, [sys.executable, "-c", "pass"], "x", "profile")
