"""What machine a profile ran on: CPU, memory, GPUs and their links, and the software stack.

``machine_fingerprint()`` is cheap (well under a second) and never raises: a fact that cannot
be read is None (or an empty list). It does not import torch when torch is not already
imported (that alone takes seconds); it reads torch's version file instead, and imports torch
only to ask for the NCCL version on a CUDA build with a visible GPU.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import socket
import sys
from collections.abc import Callable
from typing import Any

import psutil

from stash_core.measure import nvml


def _safe(read: Callable[[], Any], default: Any = None) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - a fingerprint must never stop a run; unknown is an answer
        return default


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _cpu_affinity() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    affinity = psutil.Process().cpu_affinity()  # not on macOS: _safe gives []
    return sorted(affinity)


class _TorchVersions:
    """torch.version.__version__ / .cuda without importing torch unless it is already imported."""

    def __init__(self) -> None:
        self.module = sys.modules.get("torch")
        self.version: str | None = None
        self.cuda: str | None = None
        version_module = getattr(self.module, "version", None) if self.module is not None else None
        if version_module is None:
            version_module = _safe(self._load_version_file)
        if version_module is not None:
            self.version = getattr(version_module, "__version__", None)
            self.cuda = getattr(version_module, "cuda", None)

    @staticmethod
    def _load_version_file() -> Any:
        # torch/version.py is a standalone file of constants; executing it alone is instant.
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
        file_spec = importlib.util.spec_from_file_location("_stash_torch_version", path)
        if file_spec is None or file_spec.loader is None:
            return None
        module = importlib.util.module_from_spec(file_spec)
        file_spec.loader.exec_module(module)
        return module


def _format_nccl(version: Any) -> str | None:
    if isinstance(version, tuple):  # torch >= 2.1: (major, minor, patch[, suffix])
        return ".".join(str(part) for part in version[:3])
    if isinstance(version, int):  # older torch: 2708 -> 2.7.8, 21903 -> 2.19.3
        major, rest = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return None


def _nccl_version(torch_versions: _TorchVersions, gpu_count: int) -> str | None:
    """NCCL version torch uses, when CUDA is usable here (CUDA build and at least one GPU)."""
    if not torch_versions.cuda or gpu_count == 0:
        return None
    torch = torch_versions.module
    if torch is None:
        # The nvidia-nccl wheel that CUDA builds of torch load answers without importing torch.
        for distribution in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
            version = _safe(lambda name=distribution: importlib.metadata.version(name))
            if version:
                return version
        torch = _safe(lambda: importlib.import_module("torch"))
        if torch is None:
            return None
    return _safe(lambda: _format_nccl(torch.cuda.nccl.version()))


def machine_fingerprint(instance: str | None = None) -> dict:
    """The machine's hardware and software facts; `instance` is the user's name for the machine type."""
    gpu_ok, gpu_status_text = _safe(nvml.gpu_status, (False, "no GPU: NVML query failed"))
    gpus = _safe(nvml.list_gpus, []) if gpu_ok else []
    torch_versions = _TorchVersions()
    memory = _safe(psutil.virtual_memory)
    return {
        "hostname": _safe(socket.gethostname),
        "instance": instance,
        "cpu_model": _safe(_cpu_model),
        "cpu_cores_logical": _safe(lambda: psutil.cpu_count(logical=True)),
        "cpu_cores_physical": _safe(lambda: psutil.cpu_count(logical=False)),
        "memory_bytes": int(memory.total) if memory is not None else None,
        "gpu_count": len(gpus),
        "gpus": gpus,
        "gpu_status": gpu_status_text,
        "gpu_topology": _safe(nvml.gpu_topology) if gpu_ok else None,
        "torch_version": torch_versions.version,
        "cuda_version": torch_versions.cuda,
        "nccl_version": _safe(lambda: _nccl_version(torch_versions, len(gpus))),
        "python_version": platform.python_version(),
        "os": _safe(platform.platform),
        "cpu_affinity": _safe(_cpu_affinity, []),
    }
