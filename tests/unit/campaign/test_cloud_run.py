"""A cloud campaign's faults before any machine runs (no root, nothing launched for real): a launch that
raises SkyPilot's exception, a teardown that fails, a cluster left by a crashed run; and `stash campaign
--cloud`'s refusals, one line each, exit 2, nothing launched."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from fake_skypilot import ClusterDoesNotExist, FakeCluster, FakeSky, ResourcesUnavailableError
from result_docs import result_doc
from support import REPO, stash_here

from stash_core.campaign import cloud, cloud_plan, skypilot_task
from stash_core.campaign.cloud import run_cloud_campaign
from stash_core.campaign.cloud_plan import plan_cloud
from stash_core.campaign.plan import CampaignSettings
from stash_core.catalog import set_instance
from stash_core.store import ingest_result


def steps(model, batch_size, workers, names):
    return {name: (0.2, 0.2) for name in names}, []


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    """Each test's cluster locks (campaign/cluster_locks.py) in a folder of its own, not the user's cache."""
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def settings(tmp_path):
    return CampaignSettings(db_path=tmp_path / "c.duckdb", iterations="4", stalls=["compute"])


def test_a_launch_that_fails_is_named_and_torn_down(settings, tmp_path):
    plan = plan_cloud(
        ["g5.xlarge", "g4dn.xlarge"], ["resnet18"], [8], None, settings, parallel=2, predict=steps
    )
    sky = FakeSky(
        tmp_path,
        tmp_path,
        fail_launch={
            "g5.xlarge": ResourcesUnavailableError("Failed to acquire resources in all zones in us-east-1"),
            "g4dn.xlarge": ResourcesUnavailableError("quota exceeded: 0 vCPUs for G instances"),
        },
    )
    lines = []
    outcomes = run_cloud_campaign(plan, settings, sky, report=lines.append)
    assert [outcome.state for outcome in outcomes] == ["launch failed", "launch failed"]
    assert (
        outcomes[0].error
        == "ResourcesUnavailableError: Failed to acquire resources in all zones in us-east-1"
    )
    assert sorted(call for call, _ in sky.calls) == [
        "down",
        "down",
        "launch",
        "launch",
    ]  # teardown tried anyway
    assert sky.clusters == {} and not any(outcome.left_running for outcome in outcomes)
    assert any(
        "g4dn.xlarge" in line and "launch failed: ResourcesUnavailableError: quota" in line for line in lines
    )
    assert all("spent so far at catalog prices" in line for line in lines)


class DownFails(FakeSky):
    def _down(self, name):
        raise RuntimeError("the cloud's API timed out")


def test_a_teardown_that_fails_names_the_cluster_and_the_command(settings, tmp_path):
    plan = plan_cloud(["g5.xlarge"], ["resnet18"], [8], None, settings, predict=steps)
    sky = DownFails(tmp_path, tmp_path, fail_launch={"g5.xlarge": ResourcesUnavailableError("no capacity")})
    lines = []
    (outcome,) = run_cloud_campaign(plan, settings, sky, report=lines.append, idle_minutes=20)
    cluster = plan.instances[0].cluster
    assert outcome.left_running.startswith(
        f"{cluster} (g5.xlarge) may still be running (its autostop removes "
        "it after 20 idle minutes): remove it now with `sky down "
    )
    assert lines[-1] == outcome.left_running and "\n" not in outcome.left_running


def test_a_cluster_left_by_a_crashed_run_is_found_and_its_jobs_cancelled(settings, tmp_path):
    plan = plan_cloud(["g5.xlarge"], ["resnet18"], [8], None, settings, predict=steps)
    cluster = plan.instances[0].cluster
    sky = FakeSky(tmp_path, tmp_path, fail_launch={"g5.xlarge": ResourcesUnavailableError("no capacity")})
    sky.clusters[cluster] = FakeCluster(cluster)
    lines = []
    run_cloud_campaign(plan, settings, sky, report=lines.append)
    assert [call for call, _ in sky.calls] == ["cancel", "launch", "down"]
    assert any(f"found {cluster}, left by an earlier run" in line for line in lines)
    with pytest.raises(ClusterDoesNotExist):
        sky.get(sky.down(cluster))


def test_an_instance_type_with_everything_stored_is_not_launched(settings, tmp_path):
    doc = result_doc("resnet18", batch_size=8, workers=1, nodes=1, instance="g5.xlarge", device="cuda")
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "NVIDIA A10G"}])  # a g5's machine
    ingest_result(settings.db_path, doc)
    plan = plan_cloud(["g5.xlarge"], ["resnet18"], [8], None, settings, predict=steps)
    sky = FakeSky(tmp_path, tmp_path)
    lines = []
    (outcome,) = run_cloud_campaign(plan, settings, sky, report=lines.append)
    assert outcome.state == "skipped" and sky.calls == [] and "not launched" in lines[0]


CLOUD = ["campaign", "--cloud", "--models", "resnet18", "--batch-sizes", "8"]


def _one_line_refusal(result, text):
    assert result.returncode == 2, result
    assert text in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_bad_input_is_one_line_and_launches_nothing(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    db = ["--db", str(tmp_path / "c.duckdb")]
    cases = {
        "instance type m9.huge is not in the catalog": ["--instances", "m9.huge"],
        "--spot: no spot price for instance g5.xlarge": ["--instances", "g6.xlarge,g5.xlarge", "--spot"],
        "above --budget-usd 0.01": ["--instances", "g4dn.xlarge", "--budget-usd", "0.01"],
        "SkyPilot is not installed: pip install -r requirements-cloud.txt": ["--instances", "g4dn.xlarge"],
        "--cloud profiles one machine per instance type": ["--instances", "g4dn.xlarge", "--nodes", "2"],
        "--cloud needs --instances": [],
    }
    for text, args in cases.items():
        _one_line_refusal(stash_here(capsys, monkeypatch, *CLOUD, *args, *db), text)
    _one_line_refusal(
        stash_here(capsys, monkeypatch, "campaign", "--models", "resnet18", "--spot", *db),
        "--spot goes with --cloud",
    )
    for flag, value in (("--parallel", "4"), ("--idle-minutes", "3")):  # they were taken and ignored
        local = ("campaign", "--models", "resnet18", flag, value, "--dry-run")
        _one_line_refusal(stash_here(capsys, monkeypatch, *local, *db), f"{flag} goes with --cloud")


@pytest.mark.parametrize("shape", ["3x32x32", "(3, 32, 32)"])
def test_the_cloud_plan_reads_every_input_shape_the_option_takes(tmp_path, shape):
    """--input-shape 3x32x32 was a ValueError traceback in the cloud plan's step prediction."""
    predict = cloud_plan.predict_steps(CampaignSettings(db_path=tmp_path / "c.duckdb", input_shape=shape))
    assert callable(predict)


def test_bad_input_launches_nothing_where_skypilot_is_installed(capsys, monkeypatch, tmp_path):
    """The refusals of the plan come before SkyPilot is called at all: no status, launch or teardown."""
    sky = FakeSky(tmp_path, tmp_path)
    monkeypatch.setitem(sys.modules, "sky", sky)
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: True)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    db = ["--db", str(tmp_path / "c.duckdb")]
    cases = {
        "instance type m9.huge is not in the catalog": ["--instances", "g4dn.xlarge,m9.huge"],
        "--spot: no spot price for instance g5.xlarge": ["--instances", "g6.xlarge,g5.xlarge", "--spot"],
        "above --budget-usd 0.01": ["--instances", "g4dn.xlarge", "--budget-usd", "0.01"],
    }
    for text, args in cases.items():
        _one_line_refusal(stash_here(capsys, monkeypatch, *CLOUD, *args, *db), text)
        assert sky.calls == [] and sky.clusters == {}, (text, sky.calls)
    # a model file its profiles would refuse: an instance was rented for a profile sure to fail
    for model, text in (("examples/models/tiny_cnn.py:build", "no factory named 'build'"),
                        ("os.path:join", "model factory os.path:join needs an argument a")):  # fmt: skip
        args = ["campaign", "--cloud", "--models", model, "--batch-sizes", "8", "--instances", "g4dn.xlarge"]
        _one_line_refusal(stash_here(capsys, monkeypatch, *args, *db), text)
        assert sky.calls == [] and sky.clusters == {}, (model, sky.calls)
    # a relative model file is the one from this folder (it was looked for from the checkout's root: "model
    # file not found: .../models/tiny_cnn.py"), or one outside the checkout, said so
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "m.py").write_text((REPO / "examples" / "models" / "tiny_cnn.py").read_text())
    for model, text, cwd in (("models/tiny_cnn.py:build", "no factory named 'build'", REPO / "examples"),
                             ("../m.py:make", "with --cloud a model file must lie in", work)):  # fmt: skip
        args = ["campaign", "--cloud", "--models", model, "--batch-sizes", "8", "--instances", "g4dn.xlarge"]
        _one_line_refusal(stash_here(capsys, monkeypatch, *args, *db, cwd=cwd), text)
    assert next(sky.counter) == 0  # not one request made of SkyPilot


def test_the_plans_columns_stay_aligned_under_a_long_instance_name(capsys, monkeypatch, tmp_path):
    """An Azure name of 25 characters pushed its line's region and price past the other lines'."""
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    names = "g5.xlarge,Standard_NC80adis_H100_v5"
    db = str(tmp_path / "c.duckdb")
    result = stash_here(capsys, monkeypatch, *CLOUD, "--instances", names, "--dry-run", "--db", db)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "to run," in line]
    assert len(rows) == 2 and len({line.index("$") for line in rows}) == 1
    assert len({line.index(" to run,") for line in rows}) == 1


def test_dry_run_without_skypilot_prints_the_plan_and_the_tasks(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    result = stash_here(
        capsys,
        monkeypatch,
        *CLOUD,
        "--instances",
        "g5.xlarge,g4dn.xlarge",
        "--dry-run",
        "--db",
        str(tmp_path / "c.duckdb"),
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0] == "cloud campaign: 2 instance type(s), on-demand prices from the catalog"
    assert "g5.xlarge   aws us-east-1 $1.006/h (price's region not stated, 2025-01-01)  1 to run, 0 stored" in out
    assert "at catalog prices (prices of 2025-01-01)" in out
    assert out.count("# SkyPilot task of") == 2 and "instance_type: g4dn.xlarge" in out
    assert "not checked by SkyPilot: it is not installed here" in out


def test_a_plan_in_another_region_says_whose_price_it_shows(capsys, monkeypatch, tmp_path):
    """The catalog prices g5.xlarge in us-east-1: in us-west-2 the plan showed that price as the region's."""
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    db = tmp_path / "c.duckdb"
    set_instance(db, "g5.xlarge", region="us-east-1")  # the region the catalog's price is of
    argv = [*CLOUD, "--instances", "g5.xlarge", "--region", "us-west-2", "--dry-run"]
    result = stash_here(capsys, monkeypatch, *argv, "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "g5.xlarge aws us-west-2 $1.006/h (price of us-east-1, 2025-01-01)" in result.stdout
    set_instance(db, "g5.xlarge", region="")  # a catalog row that states no region: its price is not said to
    result = stash_here(capsys, monkeypatch, *argv, "--db", str(db))  # be us-west-2's
    assert "g5.xlarge aws us-west-2 $1.006/h (price's region not stated, 2025-01-01)" in result.stdout


def test_the_note_on_iterations_auto_is_made_for_runs_of_iterations_auto_only(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    argv = [*CLOUD, "--instances", "g5.xlarge", "--dry-run", "--db", str(tmp_path / "c.duckdb")]
    note = "a run of --iterations auto is counted at its cap"
    assert note in stash_here(capsys, monkeypatch, *argv).stdout
    assert note not in stash_here(capsys, monkeypatch, *argv, "--iterations", "500").stdout


class StoppedCluster(FakeSky):
    def cancel(self, cluster_name, all=False):  # noqa: A002 - SkyPilot's name
        self.calls.append(("cancel", cluster_name))
        return self._request(lambda _: (_ for _ in ()).throw(RuntimeError("cluster is STOPPED")))


def test_a_stopped_cluster_left_behind_is_launched_again(settings, tmp_path):
    plan = plan_cloud(["g5.xlarge"], ["resnet18"], [8], None, settings, predict=steps)
    cluster = plan.instances[0].cluster
    no_capacity = {"g5.xlarge": ResourcesUnavailableError("no capacity")}
    sky = StoppedCluster(tmp_path, tmp_path, fail_launch=no_capacity)
    sky.clusters[cluster] = FakeCluster(cluster)
    lines = []
    run_cloud_campaign(plan, settings, sky, report=lines.append)
    assert [call for call, _ in sky.calls] == ["cancel", "launch", "down"]
    assert any("its jobs were not cancelled (RuntimeError: cluster is STOPPED)" in line for line in lines)


class SlowLaunch(FakeSky):
    """A launch that takes a while (provisioning), during which the user presses Ctrl-C."""

    def _launch(self, config, name, stream):
        self.clusters.setdefault(name, FakeCluster(name, config["resources"]["instance_type"]))
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)  # the main thread tears the cluster down meanwhile
        return 1, None


def test_ctrl_c_through_the_command_tears_down_and_exits_130(capsys, monkeypatch, tmp_path):
    sky = SlowLaunch(tmp_path, tmp_path)
    monkeypatch.setitem(sys.modules, "sky", sky)
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: True)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    result = stash_here(
        capsys, monkeypatch, *CLOUD, "--instances", "g5.xlarge", "--db", str(tmp_path / "c.db")
    )
    assert result.returncode == 130, result
    assert result.stderr.splitlines()[-1] == "stash: interrupted"
    assert "stopping (interrupted): tearing down stash-g5-xlarge-" in result.stderr
    assert sky.clusters == {} and [call for call, _ in sky.calls] == ["launch", "down"]


class LateCluster(FakeSky):
    """SkyPilot's launch registers the cluster some time after it was asked for (its request queue, the
    optimizer): Ctrl-C comes, and the main thread's teardowns run, before the cluster exists."""

    def __init__(self, *args, torn_down: threading.Event, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.torn_down, self.after_s = torn_down, 0.0

    def _launch(self, config, name, stream):
        os.kill(os.getpid(), signal.SIGINT)
        assert self.torn_down.wait(timeout=60), "the main thread never reached its teardowns"
        time.sleep(self.after_s)
        self.clusters.setdefault(name, FakeCluster(name, config["resources"]["instance_type"]))
        return 1, None


def _late_cluster(monkeypatch, tmp_path) -> LateCluster:
    torn_down = threading.Event()
    real = cloud._Clusters.down_all

    def down_all(self) -> None:
        real(self)
        torn_down.set()

    monkeypatch.setattr(cloud._Clusters, "down_all", down_all)
    sky = LateCluster(tmp_path, tmp_path, torn_down=torn_down)
    monkeypatch.setitem(sys.modules, "sky", sky)
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: True)
    monkeypatch.setattr(cloud_plan, "predict_steps", lambda settings: steps)
    return sky


def test_ctrl_c_before_the_cluster_exists_tears_it_down_once_launched(capsys, monkeypatch, tmp_path):
    """The main thread's teardown found no such cluster and counted it gone; the launch then made it, and
    the worker's own teardown skipped it as torn down: a rented cluster left running, and nothing said."""
    sky = _late_cluster(monkeypatch, tmp_path)
    result = stash_here(
        capsys, monkeypatch, *CLOUD, "--instances", "g5.xlarge", "--db", str(tmp_path / "c.db")
    )
    assert result.returncode == 130, result
    assert sky.clusters == {} and [call for call, _ in sky.calls] == ["launch", "down"]
    assert "may still be running" not in result.stderr


def test_a_launch_that_outlasts_the_wait_after_ctrl_c_is_said_and_torn_down_after(capsys, monkeypatch,
                                                                                    tmp_path):  # fmt: skip
    """The command ended with nothing said of a cluster whose launch had not returned after END_WAIT_S."""
    sky = _late_cluster(monkeypatch, tmp_path)
    sky.after_s = 1.0
    monkeypatch.setattr(cloud, "END_WAIT_S", 0.2)
    result = stash_here(
        capsys, monkeypatch, *CLOUD, "--instances", "g5.xlarge", "--db", str(tmp_path / "c.db")
    )
    assert result.returncode == 130, result
    assert "(g5.xlarge): its launch or teardown had not ended after 0 s; Stash tears it down" in result.stderr
    for worker in [thread for thread in threading.enumerate() if thread.name.startswith("stash-cloud")]:
        worker.join(timeout=30)  # as the interpreter does at exit
    assert sky.clusters == {} and [call for call, _ in sky.calls] == ["launch", "down"]


def test_a_local_campaign_that_no_profile_could_run_is_refused_before_it_plans(capsys, monkeypatch, tmp_path):
    """Several nodes without --bandwidths (models) or with a script, and a --results-dir below a file: each
    profile would have been refused in turn (the dry run listed them 'to run')."""
    (tmp_path / "afile").write_text("x")
    db = ["--db", str(tmp_path / "c.duckdb"), "--dry-run"]
    script = ["--script", "examples/scripts/train_ddp.py", "--workers", "1"]
    cases = {
        "the emulated cluster's here: give --bandwidths": ["--models", "resnet10", "--nodes", "2"],
        "--nodes 2: a script's campaign runs on this machine": [*script, "--nodes", "2"],
        "is not a directory": ["--models", "resnet10", "--results-dir", str(tmp_path / "afile" / "sub")],
    }  # fmt: skip
    for text, args in cases.items():
        _one_line_refusal(stash_here(capsys, monkeypatch, "campaign", *args, *db), text)
    assert not (tmp_path / "c.duckdb").exists()
