"""Stalls that must move the right way when the cause is changed (orderings, not timing thresholds)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support import REPO, SMALL, stash_main

from stash_core.data.diskcap import disk_cap_unsupported_reason
from stash_core.measure.protocol import WORKER_NAME

pytestmark = pytest.mark.launches  # every test here starts real measuring processes


def profile_json(tmp: Path, *args: str) -> dict:
    out = tmp / f"run-{len(list(tmp.glob('run-*.json')))}.json"
    result = stash_main(  # main() in this process; its launches are real processes
        "profile", *args, "--out", str(out), "--no-store", "--progress", "none",
        env_extra={"STASH_CACHE_DIR": str(tmp / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def stall_s(doc: dict, name: str) -> float:
    return doc["breakdown"]["stalls"][name]["raw_s"]


@pytest.mark.quiet
def test_heavier_preprocessing_gives_a_larger_cpu_stall(tmp_path):
    # Same model input (the crop output is 32x32); only the decoded JPEGs grow, 48 px -> 512 px. Batches
    # of 8 decoded in the main process make the difference (tens of ms) stand well above the noise.
    common = [
        *SMALL,
        "--batch-size",
        "8",
        "--stalls",
        "cpu",
        "--synthetic-images",
        "64",
        "--iterations",
        "30",
        "--loader-workers",
        "0",
    ]
    small = profile_json(tmp_path, *common, "--image-px", "48")
    large = profile_json(tmp_path, *common, "--image-px", "512")
    print(f"CPU stall: 48 px {stall_s(small, 'cpu'):.4f} s, 512 px {stall_s(large, 'cpu'):.4f} s")
    assert stall_s(large, "cpu") > stall_s(small, "cpu")


@pytest.mark.quiet
@pytest.mark.skipif(
    disk_cap_unsupported_reason(Path.home()) is not None,
    reason=f"disk read cap unavailable: {disk_cap_unsupported_reason(Path.home())}",
)
def test_a_lower_disk_read_cap_gives_a_larger_disk_stall(tmp_path):
    data = tmp_path / "data"
    from stash_core.data.jpeg_dataset import generate_synthetic_jpegs

    generate_synthetic_jpegs(64, image_px=512, root=data)
    if disk_cap_unsupported_reason(data) is not None:
        pytest.skip(f"disk read cap unavailable for {data}: {disk_cap_unsupported_reason(data)}")
    # 8 images of ~60 KB per iteration: about 1 s of reading at 0.5 MB/s, 10 ms at 50 MB/s.
    common = [*SMALL, "--batch-size", "8", "--stalls", "disk", "--dataset", str(data)]
    common += ["--iterations", "6", "--loader-workers", "0"]
    slow = profile_json(tmp_path, *common, "--disk-read-mbps", "0.5")
    fast = profile_json(tmp_path, *common, "--disk-read-mbps", "50")
    assert [phase["name"] for phase in slow["phases"]] == ["R3", "R2"]
    assert stall_s(slow, "disk") > stall_s(fast, "disk")


def start_long_profile(tmp_path: Path, stalls: str) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A profile that would run for long; returns once its two-worker run R1 has started its workers. R0
    measures for 3 s only (enough for its compute figure: 8 s less the 5 s of start-up a first launch keeps
    out); R1 is stopped while it is still starting up or in its first seconds of steps."""
    argv = [
        sys.executable, "-m", "stash_core", "profile", *SMALL, "--workers", "2", "--stalls", stalls,
        "--iterations", "100000", "--max-iterations", "100000", "--max-phase-seconds", "8",
        "--out", str(tmp_path / "run.json"),
        "--db", str(tmp_path / "r.duckdb"), "--progress", "json",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # Ctrl-C must reach it even when this test itself runs with SIGINT ignored (a background job of a
    # non-interactive shell): a child inherits an ignored SIGINT, so give it the default back.
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 240
    for line in process.stdout:
        if '"started"' in line and '"R1"' in line:
            break
    workers: list[psutil.Process] = []
    while time.monotonic() < deadline and len(workers) < 2:
        descendants = psutil.Process(process.pid).children(recursive=True)
        # Every worker names itself (torchrun, whose command line they may share, is pt_elastic).
        workers = [p for p in descendants if p.name() == WORKER_NAME]
        time.sleep(0.5)
    assert len(workers) == 2
    time.sleep(2)  # well within R1's start-up (its workers import torch, its probe runs, then 3 s of steps)
    return process, workers


def test_ctrl_c_ends_every_process_and_saves_the_run_as_interrupted(tmp_path):
    process, workers = start_long_profile(tmp_path, "compute,interconnect")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    assert process.returncode == 130
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["status"] == "interrupted"
    assert doc["phases"][0]["status"] == "completed"
    assert doc["phases"][1]["status"] == "interrupted"
    assert doc["breakdown"]["stalls"]["compute"]["status"] == "measured"


def test_a_killed_worker_fails_the_run_with_a_reason_and_no_orphans(tmp_path):
    process, workers = start_long_profile(tmp_path, "interconnect")
    workers[1].kill()
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 1
    assert "R1" in stderr and "failed" in stderr and "Traceback" not in stderr
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["status"] == "failed"
    assert doc["phases"][-1]["status"] == "failed"
