"""machine_fingerprint: every key, sane types, never raising, not importing torch."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import types
from pathlib import Path

import psutil
import pytest

from stash_core.measure import fingerprint, nvml
from stash_core.measure.fingerprint import machine_fingerprint

REPO_ROOT = Path(__file__).resolve().parents[3]

KEYS = {
    "hostname",
    "instance",
    "cpu_model",
    "cpu_cores_logical",
    "cpu_cores_physical",
    "memory_bytes",
    "gpu_count",
    "gpus",
    "gpu_status",
    "gpu_topology",
    "torch_version",
    "cuda_version",
    "nccl_version",
    "python_version",
    "os",
    "cpu_affinity",
}


def test_has_every_key_with_sane_types():
    facts = machine_fingerprint("my-laptop")
    assert set(facts) == KEYS
    assert facts["instance"] == "my-laptop"
    assert isinstance(facts["hostname"], str) and facts["hostname"]
    assert isinstance(facts["cpu_model"], str) and facts["cpu_model"]
    assert facts["cpu_cores_logical"] == psutil.cpu_count()
    assert (
        facts["cpu_cores_physical"] is None or 1 <= facts["cpu_cores_physical"] <= facts["cpu_cores_logical"]
    )
    assert facts["memory_bytes"] == psutil.virtual_memory().total
    assert facts["gpu_count"] == len(facts["gpus"])
    assert isinstance(facts["gpu_status"], str)
    assert facts["python_version"] == platform.python_version()
    assert facts["os"] == platform.platform()
    assert facts["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    assert all(0 <= core < facts["cpu_cores_logical"] for core in facts["cpu_affinity"])
    json.dumps(facts)  # goes into the result file as is


def test_software_versions_match_the_installed_torch():
    facts = machine_fingerprint()
    assert facts["torch_version"] == importlib.metadata.version("torch")
    if facts["cuda_version"] is None:
        assert facts["nccl_version"] is None


def test_gpu_less_machine_is_reported_as_such():
    ok, status = nvml.gpu_status()
    if ok:
        pytest.skip(f"this machine has GPUs: {status}")
    facts = machine_fingerprint()
    assert facts["gpu_status"].startswith("no GPU")
    assert facts["gpu_count"] == 0
    assert facts["gpus"] == []
    assert facts["gpu_topology"] is None
    assert facts["nccl_version"] is None


def test_cpu_model_comes_from_proc_cpuinfo():
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo here")
    names = [
        line.split(":", 1)[1].strip()
        for line in cpuinfo.read_text().splitlines()
        if line.split(":", 1)[0].strip() == "model name"
    ]
    if not names:
        pytest.skip("/proc/cpuinfo has no model name (e.g. some ARM machines)")
    assert machine_fingerprint()["cpu_model"] == names[0]


def test_does_not_import_torch():
    # Importing torch takes seconds; the fingerprint reads its version file instead.
    code = (
        "import sys, json\n"
        "from stash_core.measure.fingerprint import machine_fingerprint\n"
        "facts = machine_fingerprint()\n"
        "print(json.dumps({'torch_imported': 'torch' in sys.modules, 'torch': facts['torch_version']}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer == {"torch_imported": False, "torch": importlib.metadata.version("torch")}


def test_never_raises_when_every_source_fails(monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("source unavailable")

    monkeypatch.setattr(fingerprint.socket, "gethostname", broken)
    monkeypatch.setattr(fingerprint.psutil, "virtual_memory", broken)
    monkeypatch.setattr(fingerprint.psutil, "cpu_count", broken)
    monkeypatch.setattr(fingerprint.os, "sched_getaffinity", broken)
    monkeypatch.setattr(fingerprint.platform, "platform", broken)
    monkeypatch.setattr(fingerprint.nvml, "gpu_status", broken)
    monkeypatch.setattr(fingerprint, "_cpu_model", broken)
    monkeypatch.setattr(fingerprint._TorchVersions, "_load_version_file", staticmethod(broken))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    facts = machine_fingerprint("x")
    assert set(facts) == KEYS
    assert facts["hostname"] is None
    assert facts["memory_bytes"] is None
    assert facts["cpu_cores_logical"] is None
    assert facts["cpu_affinity"] == []
    assert facts["gpu_status"].startswith("no GPU")
    assert facts["gpu_count"] == 0
    assert facts["torch_version"] is None
    assert facts["os"] is None


def test_gpus_and_topology_come_from_nvml(monkeypatch):
    gpus = [
        {
            "index": 0,
            "name": "H100",
            "uuid": "GPU-a",
            "memory_bytes": 8e10,
            "pci_bus_id": "0:1",
            "power_limit_w": 700,
        },
        {
            "index": 1,
            "name": "H100",
            "uuid": "GPU-b",
            "memory_bytes": 8e10,
            "pci_bus_id": "0:2",
            "power_limit_w": 700,
        },
    ]
    topology = {"gpus": [], "pairs": [{"gpu_a": 0, "gpu_b": 1, "link": "NVLink", "pcie_path": "system"}]}
    monkeypatch.setattr(nvml, "gpu_status", lambda: (True, "2 GPUs via NVML 550"))
    monkeypatch.setattr(nvml, "list_gpus", lambda: gpus)
    monkeypatch.setattr(nvml, "gpu_topology", lambda: topology)
    facts = machine_fingerprint()
    assert facts["gpu_count"] == 2
    assert facts["gpus"] == gpus
    assert facts["gpu_status"] == "2 GPUs via NVML 550"
    assert facts["gpu_topology"] == topology


@pytest.mark.parametrize(
    ("raw", "text"),
    [((2, 21, 5), "2.21.5"), ((2, 27, 3, "a0"), "2.27.3"), (2708, "2.7.8"), (21903, "2.19.3"), ("?", None)],
)
def test_nccl_version_formats(raw, text):
    assert fingerprint._format_nccl(raw) == text


def test_nccl_version_is_asked_of_an_imported_cuda_torch_when_a_gpu_is_visible(monkeypatch):
    fake_torch = types.SimpleNamespace(
        version=types.SimpleNamespace(__version__="2.5.1+cu124", cuda="12.4"),
        cuda=types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: (2, 21, 5))),
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(nvml, "gpu_status", lambda: (True, "1 GPU via NVML 550"))
    monkeypatch.setattr(nvml, "list_gpus", lambda: [{"index": 0}])
    monkeypatch.setattr(nvml, "gpu_topology", lambda: {"gpus": [], "pairs": []})
    facts = machine_fingerprint()
    assert (facts["torch_version"], facts["cuda_version"], facts["nccl_version"]) == (
        "2.5.1+cu124",
        "12.4",
        "2.21.5",
    )
    # Without a visible GPU, CUDA is not usable here: no NCCL version.
    monkeypatch.setattr(nvml, "gpu_status", lambda: (False, "no GPU: test"))
    assert machine_fingerprint()["nccl_version"] is None
