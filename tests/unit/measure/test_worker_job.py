"""The worker job is one declared shape (measure/worker_job.WorkerJob): every key the host writes and every
key a worker reads is declared there, and a job travels through its command line unchanged."""

from __future__ import annotations

import re
from pathlib import Path

from stash_core.engine.data_setup import DataSetup
from stash_core.engine.phase import job_for
from stash_core.engine.plan import PhasePlan
from stash_core.engine.script_job import script_job
from stash_core.measure.probe_plan import probe_settings
from stash_core.measure.worker_job import ProbeSettings, WorkerJob, encode_worker_job, read_worker_job
from stash_core.spec import ProfileSpec

DECLARED = set(WorkerJob.__annotations__)
MEASURE = Path(__file__).resolve().parents[3] / "stash_core" / "measure"


def test_the_host_writes_only_declared_keys(tmp_path):
    spec = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=2, device="cpu")
    model_job = job_for(PhasePlan("R3", 2, 1, "cached"), spec, DataSetup(root=tmp_path))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    script_spec = ProfileSpec(model="train", batch_size=None, device="cpu", script=str(script))
    jobs = [model_job, script_job(PhasePlan("R1", 2, 1, "synthetic"), script_spec)]
    for job in jobs:
        assert set(job) <= DECLARED, set(job) - DECLARED
    assert set(probe_settings(1 << 20)) == set(ProbeSettings.__annotations__)


def test_every_key_a_worker_reads_is_declared():
    read = set()
    for source in MEASURE.glob("*.py"):
        read |= set(re.findall(r"\bjob(?:\.get\(|\[)\"([a-z_0-9]+)\"", source.read_text()))
    assert read, "no job key read in measure/: the pattern no longer matches the code"
    assert read <= DECLARED, read - DECLARED


def test_a_job_survives_its_command_line_inline_and_compressed():
    small: WorkerJob = {"phase": "R0", "device": "cpu", "backend": "gloo", "exclude_files": []}
    large: WorkerJob = {**small, "exclude_files": [f"file-{i:06d}.jpg" for i in range(20_000)]}
    for job, flag in ((small, "--job-json"), (large, "--job-zb64")):
        argv = encode_worker_job(job)
        assert argv[0] == flag
        assert read_worker_job(argv) == job


def test_a_model_file_reaches_the_workers_by_its_absolute_path(tmp_path, monkeypatch):
    """Workers started in another folder (an emulated node's, a host's --workdir) took `m.py:make` from there:
    a same-named file elsewhere was trained under this file's name and hash, or the run failed once begun."""
    monkeypatch.chdir(tmp_path)
    spec = ProfileSpec(model="models/m.py:make", batch_size=8, workers_per_node=2, device="cpu")
    job = job_for(PhasePlan("R1", 2, 1, "synthetic"), spec, DataSetup(root=None))
    assert job["model"] == f"{tmp_path}/models/m.py:make" and spec.model == "models/m.py:make"
    zoo = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=2, device="cpu")
    assert job_for(PhasePlan("R1", 2, 1, "synthetic"), zoo, DataSetup(root=None))["model"] == "resnet10"


def test_a_remote_hosts_worker_finds_a_relative_model_file_from_its_workdir(tmp_path, monkeypatch):
    """Hosts over ssh build the model from their own copy (a checkout in --workdir): the launcher's
    absolute path would not be there; an emulated node shares this machine's files and gets it."""
    from stash_core.engine import phase
    from stash_core.launch.hosts import RemoteHosts

    monkeypatch.chdir(tmp_path)
    taken = {}

    def run_workers(module, job, *args, **kwargs):
        taken["model"] = job["model"]
        return "stopped here"

    monkeypatch.setattr(phase, "run_workers", run_workers)
    remote = RemoteHosts.__new__(RemoteHosts)  # only what run_phase reads of it before the launch
    for spec_cluster, expected in ((None, "models/m.py:make"), ("emulated", f"{tmp_path}/models/m.py:make")):
        spec = ProfileSpec(model="models/m.py:make", batch_size=8, workers_per_node=1, nodes=2, device="cpu",
                           cluster=spec_cluster)  # fmt: skip
        phase.run_phase(PhasePlan("R1n", 2, 2, "synthetic"), spec, DataSetup(root=None), None, [], remote)
        assert taken["model"] == expected

