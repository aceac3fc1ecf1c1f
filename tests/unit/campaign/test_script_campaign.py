"""`stash campaign --script FILE -- ARGS`: a user's training script swept over worker counts (here) or
instance types (--cloud), its own arguments kept after every option Stash adds, and resumed by the script's
contents and arguments, since the script chooses its batch."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from support import REPO, stash_here

from stash_core.campaign.plan import completed_keys, plan_script_campaign, with_options
from stash_core.engine.profile_child import profile_command

SCRIPT = REPO / "examples" / "scripts" / "train_ddp.py"


def test_a_script_s_arguments_stay_after_every_option_stash_adds(tmp_path):
    assert with_options(["--script", "t.py", "--", "--db", "x"], "--out", "r.json") == [
        "--script", "t.py", "--out", "r.json", "--", "--db", "x"]  # fmt: skip
    assert with_options(["--model", "resnet10"], "--out", "r.json") == ["--model", "resnet10", "--out", "r.json"]
    argv = profile_command(tmp_path / "runs.duckdb", ["--script", "t.py", "--", "--db", "mine", "--progress"])
    cut = argv.index("--")
    assert argv[cut:] == ["--", "--db", "mine", "--progress"]  # the script's, passed through untouched
    assert argv[argv.index("--db") + 1] == str((tmp_path / "runs.duckdb").resolve()) and argv.index("--db") < cut


def test_a_script_is_one_configuration_per_worker_count_keyed_by_its_contents(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('one')\n")
    first = plan_script_campaign(str(script), ["--steps", "5"], [1, 2], [1], "box")
    assert [item.workers_per_node for item in first] == [1, 2]
    assert {item.model for item in first} == {"script:train.py"} and first[0].batch_size is None
    assert "script " in first[0].describe() and "-- --steps 5" in first[0].describe()
    spaced = plan_script_campaign(str(script), ["a b", "", "\x1b[31m"], [1], [1], "box")[0]
    assert "-- 'a b' '' '\x1b[31m'" in spaced.describe()  # quoted as a shell takes them
    script.write_text("print('two')\n")
    second = plan_script_campaign(str(script), ["--steps", "5"], [1], [1], "box")
    other_args = plan_script_campaign(str(script), ["--steps", "6"], [1], [1], "box")
    assert len({first[0].key, second[0].key, other_args[0].key}) == 3


@pytest.mark.launches
def test_a_script_campaign_profiles_then_resumes(tmp_path, capsys, monkeypatch):
    db = tmp_path / "runs.duckdb"
    options = ["campaign", "--script", str(SCRIPT), "--workers", "2", "--iterations", "20", "--db", str(db),
               "--instance", "box"]  # fmt: skip
    args = [*options, "--", "--steps", "100000", "--batch-size", "8"]
    first = stash_here(capsys, monkeypatch, *args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "1 profiled, 0 already stored, 0 failed" in first.stdout
    assert len(completed_keys(db)) == 1
    again = stash_here(capsys, monkeypatch, *args, cwd=tmp_path)
    assert again.returncode == 0 and "0 profiled, 1 already stored" in again.stdout
    changed = stash_here(capsys, monkeypatch, *options, "--dry-run", "--", "--steps", "100000", "--batch-size",
                         "16", cwd=tmp_path)  # fmt: skip
    assert "to run  script" in changed.stdout and "1 to run, 0 stored" in changed.stdout


def test_a_cloud_script_campaign_runs_the_script_from_the_workdir_with_its_arguments_last(
    tmp_path, capsys, monkeypatch
):
    args = ["campaign", "--cloud", "--dry-run", "--instances", "g5.xlarge", "--script", str(SCRIPT),
            "--iterations", "50", "--db", str(tmp_path / "runs.duckdb"), "--", "--steps", "500"]  # fmt: skip
    result = stash_here(capsys, monkeypatch, *args)
    assert result.returncode == 0, result.stderr
    assert "(time cap)" in result.stdout and "1 to run, 0 stored" in result.stdout
    line = next(line for line in result.stdout.splitlines() if "stash_core.api.child" in line)
    words = shlex.split(line.strip())
    cut = words.index("--")
    assert words[cut:] == ["--", "--steps", "500"]
    assert words[words.index("--script") + 1] == "examples/scripts/train_ddp.py"
    assert {"--out", "--db", "--progress"} <= set(words[:cut])


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--batch-sizes", "8"], "--batch-sizes does not go with --script"),
        (["--input-shape", "3,32,32"], "--input-shape does not go with --script"),
        # said as what it is for: "the script sets its own batch and data" did not fit it
        (["--depths", "10"], "--depths does not go with --script: it picks the models of a --family"),
        (["--bandwidths", "1gbit", "--nodes", "2"], "--bandwidths goes with models"),
        # said at once: it asked for --nodes, which then was refused too
        (["--bandwidths", "1gbit"], "--bandwidths goes with models"),
    ],
    ids=["batch", "shape", "depths", "bandwidths", "bandwidths-alone"],
)
def test_what_a_script_sets_itself_is_refused_with_it(extra, says, tmp_path, capsys, monkeypatch):
    result = stash_here(capsys, monkeypatch, "campaign", "--script", str(SCRIPT), *extra, "--dry-run",
                        "--db", str(tmp_path / "runs.duckdb"))  # fmt: skip
    assert result.returncode == 2 and says in result.stderr and len(result.stderr.splitlines()) == 1


def test_script_arguments_without_a_script_and_a_cloud_script_outside_the_checkout(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "runs.duckdb")
    stray = stash_here(capsys, monkeypatch, "campaign", "--models", "resnet10", "--dry-run", "--db", db, "--",
                       "--steps", "5")  # fmt: skip
    assert stray.returncode == 2 and "they need --script" in stray.stderr
    outside = tmp_path / "train.py"
    outside.write_text(Path(SCRIPT).read_text())
    cloud = stash_here(capsys, monkeypatch, "campaign", "--cloud", "--dry-run", "--instances", "g5.xlarge",
                       "--script", str(outside), "--db", db)  # fmt: skip
    assert cloud.returncode == 2 and "must lie in" in cloud.stderr and len(cloud.stderr.splitlines()) == 1
