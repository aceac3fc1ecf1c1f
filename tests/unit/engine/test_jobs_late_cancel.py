"""A Cancel that lands after the profile stored its run (its DONE line says completed) but before its process
exits changes nothing: the job reads as completed, not cancelled."""

from __future__ import annotations

import time
from pathlib import Path

from stash_core.engine import jobs

STORED_THEN_SLOW_EXIT = r"""#!/bin/sh
echo 'STASH-PHASE {"event": "started", "index": 0, "total": 1, "name": "R0", "description": "1 worker"}'
echo 'STASH-PHASE {"event": "finished", "name": "R0", "status": "completed", "mean_s": 0.2, "ci95_s": 0.01}'
echo 'STASH-DONE {"run_id": "20261122T104100Z-3f2a9c1b", "status": "completed", "stored": true}'
sleep 300
"""


def test_a_cancel_after_the_run_stored_itself_leaves_it_completed(tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text(STORED_THEN_SLOW_EXIT)
    fake.chmod(0o755)
    db = tmp_path / "results.duckdb"
    job_id = jobs.start_profile_job(db, ["--model", "resnet18", "--batch-size", "8"], python=str(fake))
    deadline = time.monotonic() + 20
    while jobs.read_job(db, job_id).run_status != "completed" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jobs.cancel_job(db, job_id, grace_s=2.0) is True
    state = jobs.wait_for_job(db, job_id, timeout_s=20)
    assert state.exit_code != 0  # the Cancel ended the process...
    assert state.status == "completed" and state.error is None  # ...after the run was stored
    assert state.run_id == "20261122T104100Z-3f2a9c1b"
