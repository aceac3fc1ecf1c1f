"""A profile's spec against the machine it runs on: devices, cores, the backend and threads per worker."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import replace

from stash_core.engine.paired import why_not_paired
from stash_core.engine.plan import check_disk_cap, check_measurable, plan_phases
from stash_core.errors import UsageError
from stash_core.measure.remote_info import usable_cpu_count
from stash_core.spec import ProfileSpec, default_of
from stash_core.spec_checks import check_fields
from stash_core.terminal import printable


def validate(spec: ProfileSpec, cuda_devices: int) -> None:
    """Check what can be checked before launching anything; raise UsageError with one line."""
    check_fields(spec)
    check_measurable(spec)
    check_disk_cap(spec)
    # --device auto is checked as the device it will resolve to.
    device = spec.device if spec.device != "auto" else ("cuda" if cuda_devices > 0 else "cpu")
    check_paired(spec, device)
    if spec.remote:
        return  # devices and cores are those of the hosts, checked once they answer
    if device == "cuda" and cuda_devices == 0:
        raise UsageError("--device cuda: no CUDA device is visible on this machine")
    if device == "cuda" and spec.workers_per_node > cuda_devices:
        raise UsageError(
            f"--workers {spec.workers_per_node}: this machine has {cuda_devices} GPU(s); one worker per GPU"
        )
    cores = usable_cpu_count()
    if device == "cpu" and spec.workers_per_node > cores:
        raise UsageError(
            f"--workers {spec.workers_per_node}: this machine has {cores} usable CPU core(s); "
            "a CPU worker needs at least one"
        )
    # Loader processes and threads beyond the cores only queue for them (the default 2 loaders always pass).
    if spec.loader_workers > max(cores, default_of("loader_workers")):
        raise UsageError(
            f"--loader-workers {spec.loader_workers}: this machine has {cores} usable CPU core(s); "
            "give at most one loader process per core"
        )
    if spec.threads_per_worker is not None and spec.threads_per_worker > cores:
        raise UsageError(
            f"--threads-per-worker {spec.threads_per_worker}: this machine has {cores} usable CPU core(s)"
        )


def refuse_auto_only(spec: ProfileSpec, typed: Collection[str] = ()) -> None:
    """--target-ci steers --iterations auto: with a fixed count it did nothing, without a word (typed at its
    default, or set away from it). --max-iterations caps a fixed count too."""
    if spec.iterations != "auto" and (spec.target_relative_ci != default_of("target_relative_ci")
                                      or "target_ci" in typed):  # fmt: skip
        raise UsageError(f"--target-ci steers --iterations auto; with --iterations {spec.iterations} every "
                         "run times that many iterations: leave one of them out")  # fmt: skip
    # a cap typed below the count asked: it ran, then stopped at the cap (the default cap is said after)
    if spec.iterations != "auto" and "max_iterations" in typed and spec.max_iterations < int(spec.iterations):
        below = f"--max-iterations {spec.max_iterations} is below --iterations {spec.iterations}"
        raise UsageError(f"{below}: no run could time the iterations asked; raise the cap or ask for fewer")


def check_paired(spec: ProfileSpec, device: str) -> None:
    """--paired on where R0 and R1 cannot be timed together: one line, before anything is launched or kept."""
    if spec.paired != "on":
        return
    names = [plan.name for plan in plan_phases(spec)[1]]
    reason = why_not_paired(replace(spec, device=device), names, bool(spec.remote))
    if reason is not None:
        raise UsageError(f"--paired on: {reason}")


def resolve_device(spec: ProfileSpec, cuda_devices: int) -> None:
    """Fill in device, backend and threads so that every run of the profile uses the same.

    On remote machines this waits for the hosts to answer (host_setup.settle_on_hosts)."""
    if spec.remote:
        return
    if spec.device == "auto":
        spec.device = "cuda" if cuda_devices > 0 else "cpu"
    if spec.backend is None:
        spec.backend = "nccl" if spec.device == "cuda" else "gloo"
    if spec.threads_per_worker is None:
        # Same thread count in R0 and R1 so that they compare like with like.
        spec.threads_per_worker = max(1, usable_cpu_count() // spec.workers_per_node)


def threads_note(spec: ProfileSpec) -> str | None:
    """The note where this environment's OMP_NUM_THREADS is not what each worker gets: every worker runs with
    --threads-per-worker (default: the machine's cores / workers per machine), a user's script too, so that
    the runs compare like with like; said, not done silently. None on other hosts (each sets its own)."""
    own = os.environ.get("OMP_NUM_THREADS", "").strip()
    if spec.remote or not own or spec.threads_per_worker is None or own == str(spec.threads_per_worker):
        return None
    return (
        f"note: OMP_NUM_THREADS={printable(own[:20])} of this environment is {spec.threads_per_worker} in "
        "each worker (--threads-per-worker sets it)"
    )


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
