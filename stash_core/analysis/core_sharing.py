"""The caveats of an interconnect stall: on a CPU profile whose workers take every core of the machine it
also holds the workers' (and gloo's) competition for the cores, beside what the probe's all-reduce alone
took; a job of one worker per machine has no interconnect of its own (the stall is R1's, the network's
reference). Said by `stash profile`, `stash show` and the Stall breakdown page alike."""

from __future__ import annotations

from stash_core.units import format_time


def core_sharing_note(doc: dict) -> str | None:
    """The note for a result document (spec, fingerprint, breakdown), or None where the workers' threads leave
    a core free, run on a GPU, or there is no interconnect stall. A job of one worker per machine also hears
    that its interconnect stall is its reference run's (R1 puts all its workers on one machine)."""
    spec, fingerprint = doc.get("spec") or {}, doc.get("fingerprint") or {}
    breakdown = doc.get("breakdown") or {}
    stall = ((breakdown.get("stalls") or {}).get("interconnect") or {}).get("seconds")
    if stall is None:
        return None
    per_machine, machines = int(spec.get("workers_per_node") or 1), int(spec.get("nodes") or 1)
    # R1, the interconnect stall's run, holds every worker of the job on one machine (on remote hosts, as many
    # as the first one takes: its phase says)
    workers = _r1_workers(doc.get("phases")) or per_machine * machines
    threads = int(spec.get("threads_per_worker") or 1)
    notes = []
    if per_machine == 1 and machines > 1:
        notes.append(
            "note: the job runs one worker per machine, so it has no interconnect of its own: the "
            f"interconnect stall ({format_time(stall)}) is what its {workers} workers cost each other on one "
            "machine in R1, the network stall's reference; the job's communication is the two together"
        )
    cores = fingerprint.get("cpu_cores_logical") or fingerprint.get("cpu_cores_physical")
    if spec.get("hosts"):  # R1 ran on the first host, whose cores this machine's fingerprint does not give...
        first = _first_host_cores(doc.get("hosts"))
        # ...unless it is a node of the emulated cluster, a namespace of this machine: a run stored before
        # the database kept its hosts (schema version 8) is then said as its profile said it
        cores = first or (cores if spec.get("cluster") == "emulated" else None)
    if spec.get("device") == "cpu" and workers >= 2 and cores and workers * threads >= int(cores):
        allreduce = ((breakdown.get("communication") or {}).get("interconnect") or {}).get("allreduce_s")
        alone = f"; the probe's all-reduce of the gradients alone took {format_time(allreduce)}"
        probe = alone if allreduce else ""
        where = "the first host's" if spec.get("hosts") else "this machine's"
        notes.append(
            f"note: the {workers} workers x {threads} thread(s) share {where} {cores} cores: the "
            f"interconnect stall ({format_time(stall)}) also holds their competition for the cores{probe}"
        )
    return "\n".join(notes) or None


def _r1_workers(phases: list[dict] | None) -> int | None:
    """The workers R1 ran (a result file's phases, or the stored phase rows); None where it is not known."""
    for phase in phases or []:
        if (phase.get("name") or phase.get("phase")) == "R1" and phase.get("workers"):
            return int(phase["workers"])  # every machine's (R1 runs on one)
    return None


def _first_host_cores(hosts: object) -> int | None:
    """The CPU count the first host reported (a result file's or a stored run's `hosts`); None where it is not
    a positive whole number (a database edited by hand holds anything)."""
    first = hosts[0] if isinstance(hosts, list) and hosts and isinstance(hosts[0], dict) else {}
    count = first.get("cpu_count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
