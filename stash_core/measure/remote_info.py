"""Print, as one JSON line, what this host offers a Stash run: Python, torch, Stash and GPUs.

Run remotely as ``python -m stash_core.measure.remote_info [FILE...]`` by
``stash_core.launch.ssh.remote_check``; the FILEs (a model file, a script) are checked for being there.
Never fails for a missing piece: each one is reported as null with a reason.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import sys


def _stash_version() -> str | None:
    try:
        import stash_core

        version = getattr(stash_core, "__version__", None)
        if version:
            return str(version)
    except ImportError:
        pass
    for distribution in ("stash", "stash-core", "stash_core"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _gpus(torch_module: object | None) -> tuple[list[dict], str | None, str]:
    """(gpus, source, status): from NVML when it answers, else torch.cuda."""
    try:
        from stash_core.measure import nvml

        ok, status = nvml.gpu_status()
        if ok:
            return nvml.list_gpus(), "nvml", status
    except Exception as exc:  # noqa: BLE001 - an info probe reports, it does not fail
        status = f"nvml unusable: {exc}"
    status = status.removeprefix("no GPU: ")
    if torch_module is not None:
        try:
            cuda = torch_module.cuda  # type: ignore[attr-defined]
            gpus = []
            for index in range(int(cuda.device_count())):
                props = cuda.get_device_properties(index)
                gpus.append({"index": index, "name": props.name, "memory_bytes": int(props.total_memory)})
        except Exception as exc:  # noqa: BLE001 - a broken CUDA setup is reported, not raised
            return [], None, f"no GPU: {status}; torch.cuda failed: {exc}"
        if gpus:
            return gpus, "torch", f"{len(gpus)} GPUs via torch.cuda"
        return [], None, f"no GPU: {status}; torch.cuda sees none"
    return [], None, f"no GPU: {status}"


def usable_cpu_count() -> int:
    """The cores this process may run on (its affinity: a container's or a taskset's share), not every core
    the machine has: what a profile's workers get."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def machine_id() -> str | None:
    """The machine's systemd/D-Bus id, which two hosts names of one machine share (None where unreadable)."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, encoding="ascii") as handle:
                return handle.read(64).strip() or None
        except (OSError, ValueError):
            continue
    return None


def collect() -> dict:
    info: dict = {
        "hostname": socket.gethostname(),
        "machine_id": machine_id(),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "cpu_count": usable_cpu_count(),
        "stash_version": _stash_version(),
        "torch_version": None,
        "torch_error": None,
        "cuda_available": False,
    }
    torch_module = None
    try:
        import torch as torch_module  # noqa: PLC0415 - optional, slow import

        info["torch_version"] = torch_module.__version__
        info["cuda_available"] = bool(torch_module.cuda.is_available())
    except Exception as exc:  # noqa: BLE001 - report a broken torch rather than crash
        info["torch_error"] = f"{type(exc).__name__}: {exc}"
    gpus, source, status = _gpus(torch_module)
    info.update({"gpu_count": len(gpus), "gpus": gpus, "gpu_source": source, "gpu_status": status})
    return info


def main(files: list[str] | None = None) -> int:
    """FILE arguments, read from the working folder as a run reads them: the ones that are no file here are
    reported (`missing_files`), so that a model file or script the host lacks is said before any run."""
    info = collect()
    info["missing_files"] = [name for name in files or [] if not os.path.isfile(os.path.expanduser(name))]
    print(json.dumps(info, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
