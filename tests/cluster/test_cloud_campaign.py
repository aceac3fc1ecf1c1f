"""A cloud campaign after provisioning, for real: SkyPilot stands in as tests/fake_skypilot.py, whose launch
brings up an emulated-cluster node; the task's set-up and run scripts run there over SSH, the result files
come back over SSH (`ssh CLUSTER`, as SkyPilot names clusters), and are stored with the instance type as the
label. SIGINT half-way, then the same campaign again: every configuration stored exactly once, nothing left
running. A profile that fails there, then the node lost mid-profile: both said, the cluster torn down,
nothing left."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import duckdb
import pytest
from clusterkit import leftovers, wait_until
from fake_skypilot import FakeSky
from support import TINY_CNN

from stash_core.campaign.cloud import run_cloud_campaign
from stash_core.campaign.cloud_plan import plan_cloud
from stash_core.campaign.plan import CampaignSettings
from stash_core.campaign.remote import REMOTE_ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.launches, pytest.mark.slow]


def steps(model, batch_size, workers, names):
    return {name: (0.01, 0.01) for name in names}, []


@pytest.fixture
def home(tmp_path, monkeypatch):
    """SkyPilot's files (~/.sky/generated/ssh/CLUSTER) in a home of the test's own."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def settings_for(tmp_path: Path) -> CampaignSettings:
    return CampaignSettings(
        db_path=tmp_path / "c.duckdb",
        iterations="4",
        stalls=["compute"],
        input_shape="3,32,32",
        num_classes=10,
        device="cpu",
        results_dir=tmp_path / "results",
    )


def stored(db_path: Path) -> list[tuple]:
    with duckdb.connect(str(db_path), read_only=True) as con:
        return con.execute(
            "SELECT model, batch_size, instance, status, spec->>'$.cloud.provider', spec->>'$.cloud.region', "
            "spec->>'$.cloud.price_date', spec->>'$.cloud.pricing' FROM runs ORDER BY instance, batch_size"
        ).fetchall()


def nothing_left(sky: FakeSky, plan) -> None:
    assert sky.clusters == {}
    assert wait_until(lambda: leftovers() == [], 20), leftovers()
    for item in plan.instances:
        assert not Path(f"{REMOTE_ROOT}/{item.cluster}").exists()
        assert not (Path.home() / ".sky" / "generated" / "ssh" / item.cluster).exists()


def three_configurations(settings: CampaignSettings):
    """g4dn.xlarge at batch 4 and 8, g5.xlarge at batch 4: two instance types at once."""
    plan = plan_cloud(["g4dn.xlarge"], [TINY_CNN], [4, 8], None, settings, parallel=2, predict=steps)
    plan.instances += plan_cloud(["g5.xlarge"], [TINY_CNN], [4], None, settings, predict=steps).instances
    return plan


def test_sigint_half_way_then_resume_stores_each_configuration_once(tmp_path, home):
    settings = settings_for(tmp_path)
    plan = three_configurations(settings)
    sky = FakeSky(tmp_path / "first", home)
    (tmp_path / "first").mkdir()
    lines: list[str] = []
    interrupted = threading.Event()

    def report(line: str) -> None:
        lines.append(line)
        if "copied back 1 of" in line and not interrupted.is_set():
            interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, once the first result is stored

    with pytest.raises(KeyboardInterrupt):
        run_cloud_campaign(plan, settings, sky, report=report, idle_minutes=5)
    nothing_left(sky, plan)
    first = stored(settings.db_path)
    assert 1 <= len(first) < 3 and {row[3] for row in first} == {"completed"}, "\n".join(lines)

    # the same campaign again: only what is not stored runs
    again = three_configurations(settings)
    assert sum(len(item.todo) for item in again.instances) == 3 - len(first)
    sky = FakeSky(tmp_path / "second", home)
    (tmp_path / "second").mkdir()
    outcomes = run_cloud_campaign(again, settings, sky, report=lines.append, idle_minutes=5)
    assert all(outcome.state in ("down", "skipped") for outcome in outcomes), "\n".join(lines)
    nothing_left(sky, again)
    rows = stored(settings.db_path)
    model = "examples/models/tiny_cnn.py:make"
    assert [row[:4] for row in rows] == [
        (model, 4, "g4dn.xlarge", "completed"),
        (model, 8, "g4dn.xlarge", "completed"),
        (model, 4, "g5.xlarge", "completed"),
    ], "\n".join(lines)
    assert {row[4:] for row in rows} == {("aws", "us-east-1", "2025-01-01", "on-demand")}
    names = sorted(path.name for path in (tmp_path / "results").rglob("*.json"))
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        run_ids = {row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()}
    parts = [name[: -len(".json")].rsplit("-", 2) for name in names]  # CONFIGURATION-RUN_ID
    assert sorted(configuration for configuration, *_ in parts) == [
        f"examples-models-tiny_cnn.py-make_b{batch}_w1_n1" for batch in (4, 4, 8)
    ]
    assert {"-".join(run_id) for _, *run_id in parts} <= run_ids
    progress = [line for line in lines if line.startswith("g4dn.xlarge")]
    for step in ("provisioning", "setting up", "profiling 1 of", "copied back 1 of", "tearing down", "down:"):
        assert any(step in line for line in progress), (step, progress)
    assert all(line.endswith("spent so far at catalog prices)") for line in progress)


def test_a_failed_profile_then_a_lost_node_end_with_everything_down(tmp_path, home):
    settings = settings_for(tmp_path)
    model_file = Path(__file__).resolve().parents[2] / "examples" / "models" / "tiny_cnn.py"
    broken = f"{model_file}:no_such_factory"  # refused there (exit 2, no result), after the machine is set up
    plan = plan_cloud(["g5.xlarge"], [broken, TINY_CNN], [4], None, settings, predict=steps)
    assert [estimate.item.model for estimate in plan.instances[0].todo][
        1
    ] == "examples/models/tiny_cnn.py:make"
    # the node disappears as the second profile starts (a preempted spot machine)
    sky = FakeSky(tmp_path, home, lose_node_on=("g5.xlarge", "stash-campaign: profiling 2 of 2"))
    lines: list[str] = []
    (outcome,) = run_cloud_campaign(plan, settings, sky, report=lines.append, idle_minutes=5)
    assert outcome.state == "down" and outcome.completed == [], "\n".join(lines)
    assert outcome.failed == [
        (plan.instances[0].todo[0].item, "no result file (the profile exited with status 2)")
    ]
    assert [item.model for item in outcome.lost] == ["examples/models/tiny_cnn.py:make"]
    assert any("1 profile(s) not finished" in line for line in lines), "\n".join(lines)
    assert ("lost", outcome.plan.cluster) in sky.calls
    nothing_left(sky, plan)
    assert not settings.db_path.exists()  # nothing finished: nothing stored
