"""`stash --help`, every subcommand's help and a refused command start without torch, pandas or DuckDB (the
start-up time is printed by `python -X importtime`, not asserted here), and help shows the defaults."""

from __future__ import annotations

import subprocess
import sys

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


@pytest.mark.parametrize("argv", [["runs"], ["show", "nothing-like-this"]], ids=["runs", "show"])
def test_commands_that_read_the_store_start_without_torch_or_the_ingest(argv, tmp_path):
    """`stash runs` and `stash show` need DuckDB and pandas (their queries return frames), nothing more: not
    torch, not the ingest (the store's names load on first use)."""
    outcome = run([*argv, "--db", str(tmp_path / "r.duckdb")])
    assert outcome["status"] in (0, 1, 2)
    assert "torch" not in outcome["loaded"]
    program = "import sys, stash_core.store as s; s.list_runs; print('store.ingest' in str(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr
