"""The Overview's first steps: the terminal block says commands that work here, the one-click profile is
launched in rounds to an interval target, and no error bar reaches below zero."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from stash_core import views
from stash_core.spec import ProfileSpec
from stash_core.store import examples


def test_the_terminal_block_names_a_stash_that_exists(tmp_path: Path) -> None:
    for db in (Path("results.duckdb"), tmp_path / "other.duckdb"):
        text = views.overview.terminal_commands(db)
        first = shlex.split(text.splitlines()[0].rstrip("\\"))
        program = first[0]
        assert Path(program).is_file() and os.access(program, os.X_OK) or shutil.which(program), text
        if program == sys.executable:
            assert first[1:3] == ["-m", "stash_core"]
        assert (f"--db {db}" in text) == (db != Path("results.duckdb"))


def test_the_terminal_block_quotes_a_database_path_for_the_shell(tmp_path: Path) -> None:
    db = tmp_path / "sp ace" / "my $HOME.duckdb"
    for line in views.overview.terminal_commands(db).replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        assert not words or words[words.index("--db") + 1] == str(db), line  # a comment line has none


def test_the_command_is_plain_stash_only_when_path_has_this_environments(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    command = views.overview.stash_command()
    assert command != "stash"
    assert command == str(Path(sys.executable).parent / "stash") or command.endswith("-m stash_core")


def test_the_first_profile_runs_in_rounds_to_an_interval_target() -> None:
    import argparse

    from stash_core.spec_argparse import add_profile_arguments

    parser = argparse.ArgumentParser()
    add_profile_arguments(parser)
    spec = ProfileSpec.from_args(parser.parse_args(examples.first_profile_args()))
    assert spec.fixed_iterations is None  # --iterations auto: each run stops at its interval target
    assert spec.target_relative_ci == pytest.approx(0.1)


def test_an_interval_wider_than_its_bar_stops_at_zero() -> None:
    breakdown = pd.DataFrame(
        [
            {"run_id": "r", "iteration_s": 0.2, "iteration_ci95_s": 0.01, "iterations_per_epoch": None,
             "compute_s": 0.05, "compute_ci95_s": 0.08, "compute_share": 0.25, "compute_status": "measured",
             "cpu_s": 0.15, "cpu_ci95_s": 0.01, "cpu_share": 0.75, "cpu_status": "measured"}
        ]
    )  # fmt: skip
    bars = views.breakdown.stall_long_frame(breakdown, "seconds").set_index("stall")
    assert bars.loc["compute", "error_low"] == 0.0 and bars.loc["compute", "error_high"] == pytest.approx(
        0.13
    )
    assert (bars["error_low"] >= 0).all()


def test_no_bar_or_interval_of_a_breakdown_reaches_below_zero_seconds() -> None:
    # A stall negative beyond the noise and larger than the compute before it (R0 slower than R1): its bar
    # would end at -0.15 s, and the axis with it.
    breakdown = pd.DataFrame(
        [
            {"run_id": "r", "iteration_s": 0.2, "iteration_ci95_s": 0.01, "iterations_per_epoch": None,
             "compute_s": 0.05, "compute_ci95_s": 0.01, "compute_share": 0.25, "compute_status": "measured",
             "interconnect_s": -0.2, "interconnect_ci95_s": 0.02, "interconnect_share": -1.0,
             "interconnect_status": "negative",
             "cpu_s": 0.3, "cpu_ci95_s": 0.05, "cpu_share": 1.5, "cpu_status": "measured"}
        ]
    )  # fmt: skip
    for measure in ("seconds", "share"):
        bars = views.breakdown.stall_long_frame(breakdown, measure)
        drawn = bars[["bar_start", "bar_end", "error_low", "error_high"]].astype(float)
        assert (drawn >= 0).all().all(), bars
        assert bars["bar_end"].iloc[-1] == pytest.approx(0.2 if measure == "seconds" else 1.0)
        assert bars.set_index("stall").loc["interconnect", "value"] < 0  # the figure itself is kept


def test_the_headline_is_never_a_stall_that_was_not_resolved() -> None:
    # The first profile on a busy machine: CPU pre-processing at 81% of the iteration but with an interval
    # wider than itself; compute resolved.
    stalls = [
        {"stall": "compute", "seconds": 0.02, "ci95_s": 0.004, "share": 0.1, "status": "measured"},
        {"stall": "cpu", "seconds": 0.16, "ci95_s": 0.24, "share": 0.81, "status": "measured"},
        {"stall": "disk", "seconds": 0.0, "ci95_s": 0.01, "share": 0.0, "status": "clamped_zero"},
    ]
    assert views.breakdown.headline_stall({"stalls": stalls})["stall"] == "compute"
    assert views.breakdown.headline_stall({"stalls": stalls[1:]}) is None
    # ... but CPU pre-processing may be the largest: its interval reaches compute's, so they are not told
    # apart
    rivals = views.breakdown.headline_rivals({"stalls": stalls}, stalls[0])
    assert [stall["stall"] for stall in rivals] == ["cpu"]


def test_a_recent_run_whose_machine_contradicts_its_label_is_marked_in_the_list(tmp_path: Path) -> None:
    """Such a run was marked only on its own Stall breakdown; the Overview's list showed it clean."""
    from result_docs import result_doc

    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    labelled = result_doc("resnet18", instance="g4dn.xlarge", workers=2, stalls={"compute": 0.1})
    own = result_doc("resnet18", instance="my-laptop", workers=2, stalls={"compute": 0.1})
    for doc in (labelled, own):
        assert ingest_result(db, doc)
    recent = views.overview.overview(db)["recent"].set_index("run_id")
    assert recent.loc[labelled["run_id"], "label"] == "contradicted"
    assert recent.loc[own["run_id"], "label"] == ""
