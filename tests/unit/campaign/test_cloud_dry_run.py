"""`stash campaign --cloud --dry-run` with SkyPilot installed (a fake one with SkyPilot's check: an instance
type must be in the catalog written for it): each task checked by it, its answer kept so that the same plan
is answered again without starting SkyPilot; and a dry run that loads no torch once the step model's count is
kept (the must-show: the plan and tasks in seconds)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fake_skypilot import install_fake_skypilot
from support import REPO, stash_here

from stash_core.campaign import cloud_plan, skypilot_task

DRY_RUN = ["campaign", "--cloud", "--dry-run", "--models", "resnet18", "--batch-sizes", "8"]


def steps(model, batch_size, workers, names):
    return {name: (0.2, 0.2) for name in names}, []


@pytest.fixture
def fake_skypilot(tmp_path, monkeypatch):
    """A fake SkyPilot installed for this process and the check's; its log of checked tasks."""
    folder = install_fake_skypilot(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_SKY_LOG", str(tmp_path / "checked.log"))
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    assert skypilot_task.skypilot_installed() and skypilot_task.skypilot_version() == "0.0.1"
    return tmp_path / "checked.log"


def test_skypilot_checks_each_task_once_and_the_answer_is_kept(capsys, monkeypatch, tmp_path, fake_skypilot):
    args = [*DRY_RUN, "--instances", "g5.xlarge,g4dn.xlarge", "--db", str(tmp_path / "c.duckdb")]
    first = stash_here(capsys, monkeypatch, *args)
    assert first.returncode == 0, first.stderr
    header = "\nchecked by SkyPilot 0.0.1 (Task, Resources; its catalog written from Stash's):\n"
    assert header in first.stdout
    checks = first.stdout.split("its catalog written from Stash's):\n")[1].splitlines()
    assert [line.split(": ", 1)[1] for line in checks] == ["ok (AWS(g5.xlarge), $1.006/h)",
                                                           "ok (AWS(g4dn.xlarge), $0.526/h)"]  # fmt: skip
    assert fake_skypilot.read_text().split() == ['"g5.xlarge"', '"g4dn.xlarge"']

    again = stash_here(capsys, monkeypatch, *args)
    assert again.returncode == 0, again.stderr
    assert fake_skypilot.read_text().split() == ['"g5.xlarge"', '"g4dn.xlarge"']  # SkyPilot not asked again
    assert again.stdout.split("\nchecked by")[0] == first.stdout.split("\nchecked by")[0]
    assert "its catalog written from Stash's), these same tasks on 20" in again.stdout
    assert again.stdout.endswith("\n".join(checks) + "\n")

    other = stash_here(capsys, monkeypatch, *args, "--region", "us-west-2")  # other tasks: asked again
    assert other.returncode == 0, other.stderr
    assert len(fake_skypilot.read_text().split()) == 4 and "these same tasks" not in other.stdout


def test_a_task_skypilot_refuses_is_said_on_its_line(capsys, monkeypatch, tmp_path, fake_skypilot):
    real = skypilot_task.catalog_rows

    def without_g5(plan, db_path):  # the catalog SkyPilot checks against lacks one instance type
        rows = real(plan, db_path)
        return {cloud: [row for row in found if row["InstanceType"] != "g5.xlarge"]
                for cloud, found in rows.items()}  # fmt: skip

    monkeypatch.setattr(skypilot_task, "catalog_rows", without_g5)
    args = [*DRY_RUN, "--instances", "g5.xlarge,g4dn.xlarge", "--db", str(tmp_path / "c.duckdb")]
    result = stash_here(capsys, monkeypatch, *args)
    assert result.returncode == 0, result.stderr
    g5, g4dn = result.stdout.split("its catalog written from Stash's):\n")[1].splitlines()
    assert "ValueError: Invalid instance type 'g5.xlarge' for cloud aws in us-east-1." in g5
    assert g4dn.endswith(": ok (AWS(g4dn.xlarge), $0.526/h)")


def test_a_budget_refusal_stops_the_check_unused(capsys, monkeypatch, tmp_path, fake_skypilot):
    args = [*DRY_RUN, "--instances", "g5.xlarge", "--budget-usd", "0.01", "--db", str(tmp_path / "c.duckdb")]
    result = stash_here(capsys, monkeypatch, *args)
    assert result.returncode == 2 and "above --budget-usd 0.01" in result.stderr
    assert "# SkyPilot task" not in result.stdout and not fake_skypilot.exists()


def _dry_run_with_sky(capsys, monkeypatch, tmp_path, sky_init: str):
    """The dry run of one instance type with a `sky` package whose __init__.py is `sky_init`."""
    sky = tmp_path / "site" / "sky"
    sky.mkdir(parents=True)
    (sky / "__init__.py").write_text(sky_init)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    args = [*DRY_RUN, "--instances", "g5.xlarge", "--db", str(tmp_path / "c.duckdb")]
    return stash_here(capsys, monkeypatch, *args)


def test_a_skypilot_that_cannot_be_loaded_is_said_with_its_reason(capsys, monkeypatch, tmp_path):
    """SkyPilot installed but broken (its install replaces click, protobuf and others): the dry run's check
    says why in one line, as a launch does, not the first line of a traceback."""
    broken = 'raise ImportError("broken sky install: missing dependency foo")\n'
    result = _dry_run_with_sky(capsys, monkeypatch, tmp_path, broken)
    assert result.returncode == 2
    assert result.stderr == (
        "stash: SkyPilot's check of the tasks failed: SkyPilot could not be loaded: broken sky install: "
        "missing dependency foo\n"
    )


SIGPIPE_DEFAULT = """
import signal, sys, time
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as a program that pipes to `head` has it
from stash_core.campaign import cloud_plan
def steps(settings):
    time.sleep(2.0)  # the check's process has failed and exited by the time the plan is made
    return lambda model, batch_size, workers, names: ({name: (0.2, 0.2) for name in names}, [])
cloud_plan.predict_steps = steps
from stash_core.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_program_with_sigpipe_at_its_default_is_told_the_check_failed_not_ended(tmp_path):
    """The check's process exited at its failed import before the plan was sent to it: the write then
    raised SIGPIPE, which ends a program that has it at its default without a word (a pytest process did)."""
    sky = tmp_path / "site" / "sky"
    sky.mkdir(parents=True)
    (sky / "__init__.py").write_text('raise ImportError("broken sky install")\n')
    env = {"PYTHONPATH": f"{tmp_path / 'site'}:{REPO}", "STASH_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # fmt: skip
    args = [*DRY_RUN, "--instances", "g5.xlarge", "--db", str(tmp_path / "c.duckdb")]
    done = subprocess.run([sys.executable, "-c", SIGPIPE_DEFAULT, *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.endswith("SkyPilot could not be loaded: broken sky install\n")


def test_a_skypilot_that_hangs_is_said_in_one_line_when_its_check_times_out(capsys, monkeypatch, tmp_path):
    """A `sky` whose import never returns ended in subprocess.TimeoutExpired's traceback after 120 s."""
    monkeypatch.setattr(skypilot_task, "CHECK_TIMEOUT_S", 2.0)
    result = _dry_run_with_sky(capsys, monkeypatch, tmp_path, "import time\ntime.sleep(300)\n")
    assert result.returncode == 2
    assert result.stderr == (
        "stash: SkyPilot's check of the tasks gave no answer in 2 s: check the SkyPilot install "
        "(`sky check`)\n"
    )


WATCH = """
import sys
from stash_core.cli import main
code = main(sys.argv[1:])
print("LOADED", [name for name in ("torch", "sky") if name in sys.modules], file=sys.stderr)
sys.exit(code)
"""


def test_a_dry_run_loads_no_torch_once_the_step_is_counted(tmp_path):
    """The model names are checked without the zoo, and the step model's count of a zoo model is kept on
    disk: only the first plan of a model and batch counts its step (with torch)."""
    env = {"PYTHONPATH": str(REPO), "STASH_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}  # fmt: skip
    args = [*DRY_RUN, "--instances", "g4dn.xlarge,p3.2xlarge", "--db", str(tmp_path / "c.duckdb")]
    command = [sys.executable, "-c", WATCH, *args]
    runs = [
        subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert "(step model)" in run.stdout and "not checked by SkyPilot" in run.stdout
    assert runs[0].stdout == runs[1].stdout
    assert runs[1].stderr.splitlines()[-1] == "LOADED []", runs[1].stderr  # the first counted with torch


def test_a_model_given_an_input_of_the_other_kind_is_refused_before_anything_is_priced_or_rented(
    tmp_path, capsys
):
    """bert_tiny with --input-shape 3,32,32 was planned and priced ($0.23, one to run; its step's refusal a
    note), and a run would have rented the instance for a profile that refuses it at once."""
    from stash_core.cli import main

    job = ["--models", "bert_tiny", "--batch-sizes", "8", "--input-shape", "3,32,32"]
    db = ["--db", str(tmp_path / "c.duckdb")]
    for where in (["--cloud", "--instances", "g5.xlarge"], []):  # rented, and local
        assert main(["campaign", "--dry-run", *where, *job, *db]) == 2
        assert "bert_tiny takes token ids" in capsys.readouterr().err


def test_a_budget_refusal_never_reads_as_the_budget_itself():
    """'the plan costs $1.03 ..., above --budget-usd 1.03': the cost is written in cents rounded up, which a
    budget of that figure meets."""
    from types import SimpleNamespace

    from stash_core.campaign.cloud_plan import cents_up, check_budget
    from stash_core.errors import UsageError

    item = SimpleNamespace(overhead_s=0.0, todo=[SimpleNamespace(seconds=3600.0)],
                           offer=SimpleNamespace(usd_per_h=0.01, name="tiny"))  # fmt: skip
    for cost, budget, said in ((1.0345, 1.03, "$1.04"), (1.2, 1.03, "$1.20"), (1.0301, 1.03, "$1.04")):
        refused = f"costs up to \\{said} at catalog prices, above --budget-usd 1.03"
        with pytest.raises(UsageError, match=refused):
            plan = SimpleNamespace(cost_usd=cost, cost_said_usd=cents_up(cost), instances=[item])
            check_budget(plan, budget)


def test_the_total_printed_is_a_budget_the_plan_meets(tmp_path, capsys, monkeypatch):
    """The README's dry run printed "$1.03" (to the nearest cent), then refused --budget-usd 1.03 as
    "$1.04"."""
    import re

    plan = ["campaign", "--cloud", "--dry-run", "--instances", "g5.xlarge,g4dn.xlarge,p3.2xlarge",
            "--models", "resnet50", "--batch-sizes", "64", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    done = stash_here(capsys, monkeypatch, *plan)
    assert done.returncode == 0, done.stderr
    total = re.search(r"^total: .* \$([0-9.]+) at catalog prices", done.stdout, re.M).group(1)
    assert cloud_plan.cents_up(float(total)) == float(total)
    again = stash_here(capsys, monkeypatch, *plan, "--budget-usd", total)
    assert again.returncode == 0, again.stderr


def test_a_types_cost_is_in_cents_up_as_the_total_and_the_budget_as_typed(tmp_path, capsys, monkeypatch):
    """One type's line said $0.28 and the total $0.29 (the line to the nearest cent), so --budget-usd 0.28,
    the only figure shown per type, was refused; a budget of 1234567 was printed as $1.23457e+06."""
    import re

    plan = ["campaign", "--cloud", "--dry-run", "--instances", "p3.2xlarge", "--spot", "--models", "resnet50",
            "--batch-sizes", "64", "--budget-usd", "1234567", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    done = stash_here(capsys, monkeypatch, *plan)
    assert done.returncode == 0, done.stderr
    line = re.search(r"^  p3\.2xlarge .* \$([0-9.]+)$", done.stdout, re.M).group(1)
    total = re.search(r"^total: .* \$([0-9.]+) at catalog prices", done.stdout, re.M).group(1)
    assert line == total and "; budget $1234567\n" in done.stdout, done.stdout


def test_a_job_the_gpu_cannot_hold_is_refused_before_anything_is_priced_or_rented(tmp_path, capsys):
    """gpt2_xl at batch 8 on a 16 GB T4 was planned and priced ($0.15): a run would have paid the machine's
    start-up for a profile that fails out of memory."""
    from stash_core.cli import main

    db = ["--db", str(tmp_path / "c.duckdb")]
    job = ["--models", "gpt2_xl", "--batch-sizes", "8", "--iterations", "100"]
    assert main(["campaign", "--cloud", "--dry-run", "--instances", "g4dn.xlarge", *job, *db]) == 2
    err = capsys.readouterr().err
    assert "gpt2_xl batch 8 on g4dn.xlarge: does not fit" in err and err.count("\n") == 1


def test_a_cpu_campaign_on_gpu_instance_types_is_refused(tmp_path, capsys):
    """--cloud --device cpu on g5.xlarge was planned with the GPU's step time and ran on its CPU."""
    from stash_core.cli import main

    args = ["campaign", "--cloud", "--dry-run", "--instances", "g5.xlarge", "--models", "resnet50",
            "--batch-sizes", "64", "--iterations", "500", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    assert main([*args, "--device", "cpu"]) == 2
    assert "--device cpu with --cloud on GPU instance types (g5.xlarge)" in capsys.readouterr().err
    assert main(args) == 0
