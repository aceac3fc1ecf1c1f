"""`stash --help`, every subcommand's help and a refused command start without torch, pandas or DuckDB (the
start-up time is printed by `python -X importtime`, not asserted here), and help shows the defaults."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support import REPO

HEAVY = ("torch", "pandas", "duckdb", "numpy", "pyarrow")
COMMANDS = [
    ["--help"], ["profile", "--help"], ["runs", "--help"], ["fit", "--help"], ["instances", "add", "--help"],
    ["recommend", "--help"], ["campaign", "--help"], ["spot", "--help"], ["schedule", "--help"],
    ["cluster", "up", "--help"], ["probe", "--help"], ["whatif", "--help"],
    ["profile", "--model", "resnet18", "--batch-size", "0"],
    ["schedule", "--synthetic-jobs", "5", "--seed", "-1"],
]  # fmt: skip

PROGRAM = """
import contextlib, io, json, sys
from stash_core.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        status = main(sys.argv[1:])
    except SystemExit as done:
        status = done.code
print(json.dumps({"status": status, "help": out.getvalue(), "loaded": sorted(
    name for name in {HEAVY} if name in sys.modules)}))
"""


def run(argv: list[str]) -> dict:
    import json

    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.replace("{HEAVY}", repr(HEAVY)), *argv],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    outcome["help"] = " ".join(outcome["help"].split())  # as one line: argparse wraps at the terminal width
    return outcome


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(argv) for argv in COMMANDS])
def test_commands_that_do_not_measure_start_without_the_heavy_libraries(argv):
    outcome = run(argv)
    assert outcome["status"] in (0, 2) and outcome["loaded"] == []


def test_help_shows_the_defaults():
    profile = run(["profile", "--help"])["help"]
    for default in ("(default: 1)", "(default: 0.02)", "(default: 2000)", "(default: auto)", "(default: 60)"):
        assert default in profile
    assert "(default: 2x4x8)" in run(["schedule", "--help"])["help"]
    assert "(default: 1gbit)" in run(["cluster", "up", "--help"])["help"]
    assert "(default: 0.05)" in run(["whatif", "--help"])["help"]


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A database with two runs: one labelled with a name the catalog does not hold, one with a catalog
    instance whose GPU the CPU-only fingerprint contradicts."""
    import result_docs

    from stash_core import store

    db = tmp_path_factory.mktemp("startup") / "r.duckdb"
    runs = (("20261124T100000Z-aaaa0001", "my-laptop", 10), ("20261124T110000Z-bbbb0002", "g4dn.xlarge", 11))
    for run_id, instance, hour in runs:
        doc = result_docs.result_doc(
            run_id=run_id, instance=instance, started_at=datetime(2026, 11, 24, hour, tzinfo=UTC)
        )
        store.ingest_result(db, doc)
    return db


@pytest.mark.parametrize(
    "argv", [["runs"], ["show", "aaaa0001"], ["show", "nothing-like-this"]], ids=["runs", "show", "show-none"]
)
def test_commands_that_read_the_store_start_without_pandas_torch_or_the_ingest(argv, stored):
    """`stash runs` and `stash show` read plain rows (store/runs.py run_rows, run_record): DuckDB only,
    not pandas, numpy or torch, and not the ingest (the store's names load on first use)."""
    outcome = run([*argv, "--db", str(stored)])
    assert outcome["status"] in (0, 2)
    assert outcome["loaded"] == ["duckdb"]
    program = "import sys, stash_core.store as s; s.list_runs; print('store.ingest' in str(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr


def test_runs_and_show_print_the_stored_figures(stored):
    runs = run(["runs", "--db", str(stored)])["help"]  # stdout, as one line
    assert runs.startswith("run_id started_at status model")
    assert runs.index("bbbb0002") < runs.index("aaaa0001")  # newest first
    assert "2026-11-24 11:00:00+00:00" in runs
    show = run(["show", "aaaa0001", "--db", str(stored)])["help"]
    assert "run 20261124T100000Z-aaaa0001" in show and "instance my-laptop" in show and "warning" not in show
    # A label the catalog holds is still checked against the machine (that check may load pandas).
    contradicted = run(["show", "bbbb0002", "--db", str(stored)])["help"]
    assert "label g4dn.xlarge of run 20261124T110000Z-bbbb0002 does not fit the machine" in contradicted


def test_a_prediction_from_a_counted_step_does_not_load_torch(tmp_path, monkeypatch):
    """The step of a zoo model is counted once (torch, on the meta device) and kept on disk; predicting from
    it again needs the store and the step model, not torch (some 2.5 s of start-up on 2 cores)."""
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["predict", "--model", "resnet18", "--batch-size", "8", "--input-shape", "3,64,64",
            "--instances", "p3.2xlarge", "--db", str(tmp_path / "x.duckdb")]  # fmt: skip
    first, again = run(argv), run(argv)
    assert first["status"] == 0 and "torch" in first["loaded"]
    assert again["status"] == 0 and "torch" not in again["loaded"]


def test_a_ctrl_c_while_the_command_loads_is_exit_130_and_no_traceback():
    """The command line's imports take a few tenths of a second; a Ctrl-C then printed a KeyboardInterrupt
    traceback through the console script and ended with 1."""
    code = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def interrupted(name, *args, **kwargs):\n"
        "    if name == 'stash_core.cli.main':\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = interrupted\n"
        "sys.argv = ['stash', 'runs']\n"
        "from stash_core.command import run\n"
        "run()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130 and done.stderr == "stash: interrupted\n", done.stderr
    entry = (REPO / "pyproject.toml").read_text()
    assert 'stash = "stash_core.command:run"' in entry  # the console script goes through it
