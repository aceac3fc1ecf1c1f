"""Ctrl-C, SIGTERM and SIGHUP: held while a save must not be cut, and ending a command (a profile saves what
it measured and leaves no process behind) with 128 + the signal's number."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time

import duckdb
import psutil
import pytest
from support import REPO, SMALL

from stash_core import interrupts
from stash_core.errors import UsageError
from stash_core.interrupts import held_interrupts
from stash_core.measure.protocol import WORKER_NAME


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler, whatever the test run inherited (a background job ignores SIGINT)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def stop_signals_at_default():
    """SIGTERM and SIGHUP at their default, as a command started from a terminal has them, whatever the test
    run inherited: under nohup SIGHUP is ignored, and an ignored SIGHUP stays ignored by design."""
    before = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


def test_an_interrupt_is_held_until_the_block_is_done(ctrl_c_raises):
    done = []
    with held_interrupts() as interrupted:
        os.kill(os.getpid(), signal.SIGINT)
        done.append("result file and database")  # still runs: the interrupt did not raise here
    assert done and interrupted == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # after the block Ctrl-C interrupts again
        os.kill(os.getpid(), signal.SIGINT)


def test_no_interrupt_leaves_the_list_empty(ctrl_c_raises):
    with held_interrupts() as interrupted:
        pass
    assert interrupted == []


# ---------------------------------------------------------------- SIGTERM and SIGHUP are handled like Ctrl-C


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_are_held_too(sig, stop_signals_at_default):
    before = signal.getsignal(sig)
    with held_interrupts() as interrupted:
        os.kill(os.getpid(), sig)
    assert interrupted == [sig] and signal.getsignal(sig) is before


@pytest.mark.parametrize(("sig", "status", "line"), [
    (signal.SIGTERM, 143, "stash: terminated (SIGTERM)"),
    (signal.SIGHUP, 129, "stash: hung up (SIGHUP)"),
    (signal.SIGINT, 130, "stash: interrupted"),
])  # fmt: skip
def test_a_stop_signal_ends_a_command_with_128_plus_its_number(
    monkeypatch, capsys, ctrl_c_raises, stop_signals_at_default, sig, status, line
):
    cli_main = importlib.import_module("stash_core.cli.main")  # the module (the package exports the function)

    seen = []

    def long_command(args):
        try:
            os.kill(os.getpid(), sig)
            time.sleep(30)  # the signal interrupts the sleep
        except KeyboardInterrupt as interrupt:  # what launch/ and the profiler catch to end and save
            seen.append(interrupt)
            raise
        return 0

    monkeypatch.setitem(cli_main.COMMANDS, "models", long_command)
    before = signal.getsignal(signal.SIGTERM)
    assert cli_main.main(["models"]) == status
    assert capsys.readouterr().err.strip() == line
    assert len(seen) == 1 and isinstance(seen[0], KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before  # main puts the handlers back


@pytest.mark.parametrize(("sig", "status", "line"), [
    (signal.SIGTERM, 143, "stash: terminated (SIGTERM)"),
    (signal.SIGINT, 130, "stash: interrupted"),
])  # fmt: skip
@pytest.mark.parametrize("after", [
    RuntimeError("Query interrupted"),  # DuckDB's own, where it noticed the signal
    duckdb.InvalidInputException("reading the schema of the object registered failed: Stopped"),
    UsageError("cannot store run 20261201T050025Z-00000019: Query interrupted"),
])  # fmt: skip
def test_an_error_that_a_stop_signal_caused_is_said_as_the_signal(
    monkeypatch, capsys, ctrl_c_raises, stop_signals_at_default, sig, status, line, after
):
    """Ctrl-C or SIGTERM during `stash ingest` or `export` ended in DuckDB's "Query interrupted" (a
    traceback), or in a usage error (exit 2) wrapping it."""
    cli_main = importlib.import_module("stash_core.cli.main")

    def ingesting(args):
        try:
            os.kill(os.getpid(), sig)
            time.sleep(30)
        except KeyboardInterrupt:  # as DuckDB takes the signal in a query and raises its own error
            raise after from None
        return 0

    monkeypatch.setitem(cli_main.COMMANDS, "models", ingesting)
    assert cli_main.main(["models"]) == status
    assert capsys.readouterr().err.strip() == line


def test_an_ignored_sighup_stays_ignored(monkeypatch):
    from stash_core.interrupts import signals_as_interrupts

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with signals_as_interrupts():
            os.kill(os.getpid(), signal.SIGHUP)  # nothing happens
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def _workers(pid: int) -> list[psutil.Process]:
    # Every worker names itself (torchrun, whose command line they may share, is pt_elastic).
    return [
        process for process in psutil.Process(pid).children(recursive=True) if process.name() == WORKER_NAME
    ]


@pytest.mark.launches
def test_sigterm_during_r1_saves_an_interrupted_run_and_leaves_no_processes(tmp_path):
    out, db = tmp_path / "run.json", tmp_path / "r.duckdb"
    argv = [
        sys.executable, "-m", "stash_core", "profile", *SMALL, "--workers", "2",
        "--stalls", "compute,interconnect", "--iterations", "100000", "--max-iterations", "100000",
        "--max-phase-seconds", "3",  # R0: 3 s of steps; R1 is stopped while it starts up
        "--out", str(out), "--db", str(db), "--progress", "json",
    ]  # fmt: skip
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        for line in process.stdout:
            if '"started"' in line and '"R1"' in line:
                break
        deadline, workers = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(workers) < 2:
            workers = _workers(process.pid)
            time.sleep(0.2)
        assert len(workers) == 2, "R1 never started its two workers"
        time.sleep(1)  # R1 starting up: its workers import torch
        everything = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "stash: terminated (SIGTERM)" and "Traceback" not in stderr
    _, alive = psutil.wait_procs(everything, timeout=10)
    assert not alive
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and doc["error"] == "terminated (SIGTERM)"
    assert [(phase["name"], phase["status"]) for phase in doc["phases"]] == [
        ("R0", "completed"),
        ("R1", "interrupted"),
    ]
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute("SELECT run_id, status FROM runs").fetchall()
        phases = con.execute("SELECT phase, status FROM phases ORDER BY phase_index").fetchall()
    assert stored == [(doc["run_id"], "interrupted")] and phases == [
        ("R0", "completed"),
        ("R1", "interrupted"),
    ]


def test_a_dashboard_job_its_run_page_cancelled_is_said_cancelled_not_terminated(tmp_path, monkeypatch):
    """A profile cancelled on the Run page was stored, and listed on the Overview, as 'terminated
    (SIGTERM)'."""
    monkeypatch.setenv("STASH_JOB_RC", str(tmp_path / "rc"))
    stopped = interrupts.Stopped(signal.SIGTERM)
    assert interrupts.reason(stopped) == "terminated (SIGTERM)"  # a signal from elsewhere
    (tmp_path / "cancelled").write_text("2026-12-06T00:00:00+00:00\n")  # as engine/jobs.cancel_job marks it
    assert interrupts.reason(stopped) == "cancelled by the user"
    assert interrupts.reason(KeyboardInterrupt()) == "interrupted by the user"
    monkeypatch.delenv("STASH_JOB_RC")
    assert interrupts.reason(stopped) == "terminated (SIGTERM)"
