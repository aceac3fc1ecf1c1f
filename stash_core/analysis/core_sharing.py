"""The caveat of a CPU profile whose workers take every core of the machine: its interconnect stall then
also holds the workers' (and gloo's) competition for the cores, beside what the probe's all-reduce alone took.
Said by `stash profile`, `stash show` and the Stall breakdown page alike."""

from __future__ import annotations

from stash_core.units import format_time


def core_sharing_note(doc: dict) -> str | None:
    """The note for a result document (spec, fingerprint, breakdown), or None where the workers' threads leave
    a core free, run on a GPU, or there is no interconnect stall."""
    spec, fingerprint = doc.get("spec") or {}, doc.get("fingerprint") or {}
    breakdown = doc.get("breakdown") or {}
    workers, threads = int(spec.get("workers_per_node") or 1), int(spec.get("threads_per_worker") or 1)
    cores = fingerprint.get("cpu_cores_logical") or fingerprint.get("cpu_cores_physical")
    if spec.get("device") != "cpu" or workers < 2 or not cores or workers * threads < int(cores):
        return None
    stall = ((breakdown.get("stalls") or {}).get("interconnect") or {}).get("seconds")
    if stall is None:
        return None
    allreduce = ((breakdown.get("communication") or {}).get("interconnect") or {}).get("allreduce_s")
    alone = f"; the probe's all-reduce of the gradients alone took {format_time(allreduce)}"
    probe = alone if allreduce else ""
    return (
        f"note: the {workers} workers x {threads} thread(s) share this machine's {cores} cores: the "
        f"interconnect stall ({format_time(stall)}) also holds their competition for the cores{probe}"
    )
