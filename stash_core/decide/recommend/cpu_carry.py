"""A profile's CPU stall carried to another machine: its loaders' CPU seconds per sample, for that machine's
vCPUs per worker and step (whatif.cpu_stall_elsewhere). The input pipeline is the job's, not the GPU's, so a
profile with real data on one instance speaks for every instance's CPU stall, each vCPU taken as fast as a
core of the profiled machine (an assumption, so the rows it enters are not validated)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stash_core.analysis.coherence import impossible_of_stored
from stash_core.decide.recommend.costs import data_not_profiled
from stash_core.decide.whatif import cpu_stall_elsewhere
from stash_core.units import finite_float


def data_profiles(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPU profiles (in the order given) that measured a CPU stall with real data. A CPU machine's are
    left out: its loaders share the cores with the model's own step, so its cached run's time is not theirs
    (a 1-vCPU profile gave every GPU row 200 ms of "loading" on an 18 ms step)."""
    return [
        row for row in rows
        if str(row.get("device") or "").startswith("cuda") and not data_not_profiled(row)
        and finite_float(row.get("cpu_s")) is not None
    ]  # fmt: skip


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
    bases: list[dict[str, Any]],
    run_of: Callable[[dict[str, Any]], dict[str, Any]],
    instance: dict[str, Any],
    workers: int,
    sync_s: float,
    catalog: dict[str, dict[str, Any]],
) -> tuple[float | None, str]:
    """A row's CPU stall from the first of `bases` (data_profiles) that can tell it, with its note; None and
    the note of why where none can (no such profile; an impossible breakdown, or one whose CPU stall is hidden
    or unresolved, or loads in the main process)."""
    for base in bases:
        run = run_of(base)
        if run and impossible_of_stored(run.get("warnings"), run.get("stalls"), run):
            continue  # a CPU stall of 141% of the iteration is no loaders' time
        found = carried_cpu_stall(run, base, instance, workers, sync_s, catalog)
        if found is not None:
            return found
    why = "they need a GPU profile of the job with real data"
    if bases:
        why = f"{', '.join(base['run_id'] for base in bases[:3])} cannot tell the loaders' CPU per sample"
    return None, f"CPU and disk stalls not predicted ({why}), left out of the time"
