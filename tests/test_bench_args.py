"""The benchmarks refuse a bad argument in one line with exit status 2, before anything is timed (a count of 0
or less ran nothing or ended in a traceback), and --help prints the whole docstring. Nothing is timed here."""

from __future__ import annotations

import sys

import pytest
from forked import ForkServer
from support import REPO

# What the benchmarks import before they read their arguments: imported once, then forked per script.
_PRELOAD = [
    "torch", "torch.profiler", "pandas", "numpy", "duckdb", "stash_core.zoo", "stash_core.store",
    "stash_core.decide.predict", "stash_core.analysis.stats",
]  # fmt: skip


@pytest.fixture(scope="module")
def bench_python():
    server = ForkServer(_PRELOAD)
    yield server
    server.close()

BAD = [
    ("make_big_db.py", ["/tmp/x.duckdb", "--runs", "0"]),
    ("make_big_db.py", ["/tmp/x.duckdb", "--iterations-per-phase", "-3"]),
    ("export.py", ["--runs", "0"]),
    ("dashboard.py", ["/tmp/x.duckdb", "--repeat", "0"]),
    ("overhead.py", ["--pairs", "0"]),
    ("overhead.py", ["--block", "-1"]),
    ("overhead.py", ["--model", "nosuchmodel"]),
    ("overhead.py", ["--input-shape", "3,x,32"]),
    ("script_overhead.py", ["--pairs", "0"]),
    ("paired_blocks.py", ["--block", "0"]),
    ("launch_startup.py", ["--launches", "0"]),
    ("launch_variance.py", ["--launches", "0"]),
    ("launch_variance.py", ["--variants", "nosuchvariant"]),
    ("intervals.py", ["--repetitions", "0"]),
    ("predict_catalog.py", ["--repeat", "0"]),
    ("predict_catalog.py", ["--batch-size", "0"]),
    ("predict_catalog.py", ["--model", "nosuchmodel"]),
    ("schedule.py", ["--jobs", "0"]),
    ("schedule.py", ["--load", "0"]),
    ("schedule.py", ["--cluster", "16x8"]),
    ("schedule.py", ["--policies", "fifo,nosuchpolicy"]),
    ("prediction.py", ["--batch-size", "0"]),
    ("network.py", ["--batch-size", "-2"]),
    ("prediction.py", ["--db", "/nonexistent/campaign.duckdb"]),  # said "run with --run first"
    ("script_input_cost.py", ["--rounds", "0"]),  # ran a whole profile, then an IndexError
    ("script_input_cost.py", ["--steps", "0"]),  # never ended
    ("script_input_cost.py", ["--files-per-step", "2"]),  # below the batch of 4: a division by zero
    ("script_input_cost.py", ["--files-per-step", "6"]),
    ("script_input_cost.py", ["--px", "-5"]),
    ("script_input_cost.py", ["--files", "0"]),
    ("script_input_cost.py", ["--files", "8"]),  # fewer than a step's files: never stepped
    ("network.py", ["--bandwidths", "foo"]),  # failed only once the cluster was being built
    ("network.py", ["--models", "nosuchmodel"]),  # caught only once the cluster was up
    ("schedule.py", ["--paper", "--policies", "spread"]),  # ignored without a word
    ("schedule.py", ["--paper", "--node-gbps=5", "--scenarios=plain"]),
    ("schedule.py", ["--paper", "--jobs=0"]),
    ("sched_paper.py", ["--bogus"]),  # printed nothing and exited 0: schedule.py --paper runs it
    ("kernels.py", ["--rebuild", "/nonexistent"]),  # a traceback: no objects to concatenate
    ("paired_blocks.py", ["--pairs", "2"]),
    ("paired_blocks.py", ["--warmup", "-3"]),
    ("gpu_steps.py", ["--budget-s", "-1"]),
    ("gpu_layouts.py", ["--budget-s", "0"]),
    ("gpu_steps.py", ["--set", "nosuch"]),
    ("gpu_rnn.py", ["--budget-s", "0"]),
    ("gpu_rnn.py", ["--predict-only"]),  # whose predictions: --cpu-as names the GPU
    ("gpu_multi.py", ["--gpus", "1"]),  # an all-reduce needs two
    ("gpu_multi.py", ["--predict-only", "--instance", "nosuch"]),
    # no options of their own: an argument is refused, and --help is not a run
    ("console_ingest.py", ["--bogus"]),
    ("comm_factors.py", ["--bogus"]),
    ("compiler_stand_in.py", ["--bogus"]),
    ("comm_report.py", ["--bogus"]),
    ("cross_instance.py", ["--bogus"]),
    ("gpu_convs.py", ["--bogus"]),
    ("gpu_ops.py", ["--bogus"]),
    ("kernel_steps.py", ["--bogus"]),
    ("single_gpu_holdout.py", ["--bogus"]),
]


@pytest.mark.parametrize(("script", "argv"), BAD, ids=[f"{s} {' '.join(a)}" for s, a in BAD])
def test_a_bad_argument_is_one_line_and_exit_2(bench_python, script: str, argv: list[str]) -> None:
    done = bench_python.run(REPO / "bench" / script, *argv, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "script",
    [
        "make_big_db.py",
        "predict_catalog.py",
        "schedule.py",
        "launch_variance.py",
        "console_ingest.py",
        "comm_factors.py",
        "compiler_stand_in.py",
        "script_input_cost.py",
        "network.py",
        "comm_report.py",
        "cross_instance.py",
        "gpu_steps.py",
        "gpu_rnn.py",
        "gpu_multi.py",
        "gpu_convs.py",
        "gpu_layouts.py",
        "gpu_ops.py",
        "kernels.py",
        "kernel_steps.py",
        "single_gpu_holdout.py",
        "paired_blocks.py",
    ],
)
def test_help_prints_the_whole_docstring(bench_python, script: str) -> None:
    import ast

    path = REPO / "bench" / script
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    done = bench_python.run(path, "--help", cwd=REPO)
    assert done.returncode == 0 and doc.strip().splitlines()[-1].strip() in done.stdout, done.stdout


def test_every_bench_parses_with_bench_parser() -> None:
    """A plain argparse parser prints the usage block with an error and leaves the docstring out of --help."""
    plain = [path.name for path in sorted((REPO / "bench").glob("*.py")) if "argparse.ArgumentParser(" in
             path.read_text() and path.name != "bench_args.py"]  # fmt: skip
    assert plain == []


def test_the_dashboard_says_a_file_is_no_database_in_one_line(bench_python, tmp_path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n")
    done = bench_python.run(REPO / "bench" / "dashboard.py", str(text), cwd=REPO)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "not a DuckDB database" in done.stderr


def test_one_value_has_no_spread() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from bench_args import spread_text

    assert spread_text([1.5]) == "n/a" and spread_text([1.0, 3.0]) == "1.41"


def test_the_dashboard_benchmark_times_every_page_of_the_navigation() -> None:
    import re

    sys.path.insert(0, str(REPO / "bench"))
    from dashboard import PAGES

    navigation = re.findall(r'st\.Page\("(pages/[a-z_]+\.py)"', (REPO / "app.py").read_text())
    assert sorted(PAGES.values()) == sorted(navigation) and len(navigation) >= 11


def test_intervals_says_every_profile_failed_instead_of_a_traceback() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from intervals import report

    with pytest.raises(SystemExit, match="every profile failed"):
        report([{"setting": "paired", "wall_s": 1.0, "failed": True}], ("paired",), None)


def test_the_synthetic_database_has_the_current_schema(bench_python, tmp_path) -> None:
    """make_big_db.py failed on the stalls table once it gained a column: it builds every table in full."""
    from stash_core.store import query_readonly

    db = tmp_path / "big.duckdb"
    argv = [str(db), "--runs", "30", "--iterations-per-phase", "5", "--telemetry-points", "2"]
    done = bench_python.run(REPO / "bench" / "make_big_db.py", *argv, cwd=REPO)
    assert done.returncode == 0, done.stderr
    sql = "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM stalls WHERE raw_s > 0) AS n"
    counts = query_readonly(db, sql)
    assert counts["runs"][0] == 30 and counts["n"][0] > 0


def test_a_bench_whose_reader_goes_away_ends_without_a_traceback() -> None:
    """`bench/rnn_kernels.py | head -1` printed a BrokenPipeError traceback."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, str(REPO / "bench" / "rnn_kernels.py")], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:  # fmt: skip
        proc.stdout.close()  # the reader gone before the bench writes a line
        stderr = proc.stderr.read().decode()
        proc.wait(timeout=120)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_a_bench_imported_by_another_program_leaves_its_sigpipe_as_it_was(monkeypatch) -> None:
    """A test calling bench/schedule.py's parse_args set this process's SIGPIPE to the default: the pytest
    process then ended silently at its next write to a child that had exited before reading (xdist: "worker
    crashed" in a test of SkyPilot's check, files later)."""
    import signal

    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from schedule import parse_args

    monkeypatch.setattr(sys, "argv", ["schedule.py", "--jobs=300"])
    before = signal.getsignal(signal.SIGPIPE)
    parse_args()
    assert signal.getsignal(signal.SIGPIPE) == before == signal.SIG_IGN  # Python's own, for every program


@pytest.mark.parametrize("helper", ["interleaved.py", "bench_args.py"])
def test_a_helper_module_run_as_a_benchmark_says_what_it_is(bench_python, helper: str) -> None:
    """Run directly (`--help` included) they printed nothing and exited 0, as if a benchmark had run."""
    done = bench_python.run(REPO / "bench" / helper, "--help", cwd=REPO)
    assert done.returncode == 1 and "run one of" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""


def test_prediction_says_the_stored_stalls_are_too_few_to_leave_one_model_out(bench_python, tmp_path) -> None:
    """Two models' interconnect stalls were said to be none ("run with --run first")."""
    from stash_core.store.ingest import ingest_files

    db = tmp_path / "two.duckdb"
    ingest_files(db, sorted((REPO / "examples" / "results").glob("*.json")))
    done = bench_python.run(REPO / "bench" / "prediction.py", "--db", str(db), cwd=REPO)
    assert done.returncode == 1 and "too few to predict one model without it" in done.stderr, done.stderr
    assert "no measured" not in done.stderr and done.stdout == ""
