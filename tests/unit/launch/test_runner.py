"""The environment of Stash's workers: torchrun and the workers it starts with `python -m` get no current
folder on sys.path, where a stray json.py would be imported in place of the standard one."""

from __future__ import annotations

import os

import pytest
from support import REPO

from stash_core import SAFE_PATH_VALUE
from stash_core.launch.local import run_local, torchrun_argv
from stash_core.launch.runner import worker_env


def test_workers_get_stashs_safe_path_and_a_users_own_is_kept(monkeypatch):
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    assert worker_env(1)["PYTHONSAFEPATH"] == SAFE_PATH_VALUE
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    assert worker_env(1)["PYTHONSAFEPATH"] == "1"


@pytest.mark.launches
def test_a_json_py_in_the_current_folder_is_not_imported_by_torchrun_or_its_worker(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    ran = tmp_path / "stray-ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "says_json.py").write_text("import json\nprint(json.dumps({'worker': 'ok'}), flush=True)\n")
    monkeypatch.chdir(tmp_path)
    env = {**worker_env(1), "PYTHONPATH": os.pathsep.join([str(modules), str(REPO)])}
    lines: list[str] = []
    # started anew with `python -m says_json`, as torchrun starts a user's script or a worker on a GPU
    failure = run_local(torchrun_argv(1, "says_json", []), lines.append, timeout_s=120, env=env)
    assert failure == [], lines
    assert any('{"worker": "ok"}' in line for line in lines) and not ran.exists()


def test_a_remote_host_keeps_its_workdir_on_sys_path(monkeypatch):
    """A host that imports Stash from a checkout in its --workdir (its current folder) gets neither this
    machine's PYTHONPATH nor its PYTHONSAFEPATH."""
    from stash_core.launch import runner
    from stash_core.launch.hosts import RemoteHosts
    from stash_core.launch.ssh import SshTarget

    sent = {}
    monkeypatch.setattr(runner, "launch_torchrun_over_ssh", lambda **kwargs: sent.update(kwargs))
    remote = RemoteHosts(targets=[SshTarget(host="gpu-a")], python="python3", workdir="/srv/stash")
    job = {"phase": "R0", "device": "cpu"}
    runner.run_workers("stash_core.measure.worker", job, 1, 1, remote, print, 10, env=worker_env(1))
    assert sent["workdir"] == "/srv/stash"
    assert "PYTHONSAFEPATH" not in sent["env"] and "PYTHONPATH" not in sent["env"]
