"""Other load during a launch, measured: CPU time of processes that are not the launch's own."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from stash_core.engine.machine_load import LoadMeter

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\nprint(time.process_time())"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_launch_own_processes_are_its_own_and_a_stranger_is_other_load() -> None:
    own = LoadMeter().start()
    done = subprocess.run(
        [sys.executable, "-c", BUSY.format(s=0.6)], check=True, capture_output=True, text=True
    )
    load = own.stop()
    child_cpu_s = float(done.stdout)  # the launch's own CPU time, as it counted it
    assert child_cpu_s <= load.own_cpu_s <= child_cpu_s + 0.3, load  # + its interpreter's start-up

    stranger = subprocess.Popen([sys.executable, "-c", BUSY.format(s=30)])  # not waited for: someone else
    try:
        time.sleep(0.3)  # its start-up
        before = psutil.Process(stranger.pid).cpu_times()
        meter = LoadMeter().start()
        time.sleep(1.0)
        load = meter.stop()
        after = psutil.Process(stranger.pid).cpu_times()
    finally:
        stranger.kill()
        stranger.wait()
    stranger_cpu_s = after.user + after.system - before.user - before.system
    assert stranger_cpu_s > 0.2  # it ran, even on a busy machine
    # its CPU time is other load (with the clock tick's rounding), and so is anything else that ran
    assert load.other_cpu_s >= stranger_cpu_s - 0.05 and load.other_cores <= load.cores + 0.1, load
    assert load.to_dict()["cores"] == load.cores and load.load_avg_end >= 0.0


def test_without_proc_stat_there_is_no_figure(monkeypatch) -> None:
    from stash_core.engine import machine_load

    monkeypatch.setattr(machine_load, "PROC_STAT", "/nonexistent/stat")
    assert LoadMeter().start().stop() is None
    assert LoadMeter().stop() is None  # never started
