"""A profile's CPU stall carried to another machine: its loaders' CPU seconds per sample, for that machine's
vCPUs per worker and step (whatif.cpu_stall_elsewhere). The input pipeline is the job's, not the GPU's, so a
profile with real data on one instance speaks for every instance's CPU stall, each vCPU taken as fast as a
core of the profiled machine (an assumption, so the rows it enters are not validated)."""

from __future__ import annotations

from typing import Any

from stash_core.decide.recommend.costs import data_not_profiled
from stash_core.decide.whatif import cpu_stall_elsewhere
from stash_core.units import finite_float


def data_profile(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first profile (in the order given) that measured a CPU stall with real data, or None."""
    for row in rows:
        if not data_not_profiled(row) and finite_float(row.get("cpu_s")) is not None:
            return row
    return None


def carried_cpu_stall(
    run: dict[str, Any],
    base: dict[str, Any],
    instance: dict[str, Any],
    workers: int,
    sync_s: float,
    catalog: dict[str, dict[str, Any]],
) -> tuple[float, str] | None:
    """(the CPU stall, a note) of `base`'s job (its stored `run`) on `instance`, `workers` workers each, and
    a step of `sync_s` with the data ready; None where the profile cannot tell (no cached real-data phase,
    a CPU stall hidden or unresolved, loading in the main process) or the instance has no vCPU count."""
    vcpus = finite_float(instance.get("vcpus"))
    if not vcpus or not run:
        return None
    # the profiled machine's cores counted as this one's are, by the catalog, where it has the instance
    profiled_vcpus = finite_float((catalog.get(base["instance"]) or {}).get("vcpus"))
    profiled = profiled_vcpus / int(base["workers_per_node"]) if profiled_vcpus else None
    found = cpu_stall_elsewhere(run, vcpus / workers, sync_s, profiled)
    if found is None:
        return None
    stall_s, sample_s = found
    return stall_s, (
        f"CPU stall for {vcpus / workers:g} vCPUs per worker from {base['run_id']}'s {sample_s * 1e3:.2f} ms "
        "of CPU per sample (its loader workers, each vCPU as fast as a core of the profiled machine)"
    )


def carried_or_why(
    base: dict[str, Any] | None,
    run: dict[str, Any],
    instance: dict[str, Any],
    workers: int,
    sync_s: float,
    catalog: dict[str, dict[str, Any]],
) -> tuple[float | None, str]:
    """A row's CPU stall from `base`, the profile data_profile chose (its stored `run`), with its note; None
    and the note of why where there is none (no such profile, or one that cannot tell)."""
    found = carried_cpu_stall(run, base, instance, workers, sync_s, catalog) if base else None
    if found is not None:
        return found
    why = "they need a profile with real data"
    if base:
        why = f"{base['run_id']} cannot tell its loaders' CPU per sample"
    return None, f"CPU and disk stalls not predicted ({why}), left out of the time"
