"""What-if questions about a stored run: what would hide its CPU, disk and network stalls.

Every answer is derived from the run's own differential phases (t_k = mean iteration seconds of run Rk):

CPU (pre-processing). In R3 the data is in the page cache, so a loader-bound R3 iteration takes
t3 = B x c / L_eff, where B is the per-worker batch, c the CPU seconds to pre-process one sample and L_eff
the loader processes that really ran in parallel (the DataLoader workers, capped by the cores per worker).
Hence c = L_eff x t3 / B, and k cores per worker hide the CPU stall when B x c / k <= t_sync (the time of the
same step with synthetic data, R1 or R1n): k = ceil(L_eff x t3 / t_sync). With 0 loader workers the main
process loads serially, t3 = t_sync + B x c. Predicted: t3(k) = max(t_sync, B x c / k).

Disk (fetch). In R2 the data comes from the disk. If R2 is disk-bound, reading one iteration's samples
takes t2, so with a fraction f of the data set cached only (1 - f) x t2 remains, hidden under t3 when
f >= 1 - t3 / t2 = disk_s / t2. Cache size = f x data set bytes (sample size from the data set folder if it is
still there, else from the disk read telemetry of R2). Predicted iteration time: t3.

Network. Gradient exchange between machines scales with 1 / bandwidth, so at bandwidth B the network stall
is s x B_now / B. The bandwidth that shrinks it to `target_share` of the rest of the iteration is
B_now x s / (target_share x (t - s)). B_now comes from the emulated link setting, an "@1gbit" label suffix
or the catalog's network Gbps of the instance.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from stash_core.analysis.coherence import impossible_of_stored
from stash_core.analysis.stats import resolved
from stash_core.catalog import get_instance
from stash_core.decide.fit.observations import spec_bandwidth_gbps, split_instance_label
from stash_core.decide.whatif_stalls import (
    DEFAULT_TARGET_SHARE,
    MIN_TARGET_SHARE,
    checked_figure,
    hidden,
    phase_times,
    seconds_of,
    step_noise_answer,
    synthetic_step_s,
    unanswered,
    unresolved_step,
    why_not,
    within_noise,
)
from stash_core.errors import UsageError, no_run_error
from stash_core.store import get_run, telemetry_frame
from stash_core.store.partial_time import partial_note
from stash_core.units import finite_float, size_words


def whatif(db_path: Path | str, run_id: str, target_share: float = DEFAULT_TARGET_SHARE) -> dict[str, Any]:
    """Answers for one stored run: run_id, model, iteration_s, partial, cpu, disk, network, assumptions.

    Each of cpu / disk / network has "status" ("answered", "hidden already", "within target" (network),
    "not measured" or why not), the resource needed, "predicted_iteration_s" with it and a one-line "summary".
    """

    if not MIN_TARGET_SHARE <= target_share < 1:
        raise UsageError(f"target share must be from {MIN_TARGET_SHARE:g} to below 1, got {target_share!r}")
    run = get_run(db_path, run_id)
    if run is None:
        raise no_run_error(run_id, db_path)
    status = run.get("status")
    if status not in ("completed", "interrupted"):  # an interrupted run has the breakdown of its rounds done
        raise UsageError(f"run {run['run_id']} did not complete ({status or '-'}): nothing to ask of it")
    if finite_float(run.get("iteration_s")) is None:  # none, or a damaged row's inf or NaN
        raise UsageError(f"run {run['run_id']} has no iteration time: nothing to ask of it")
    if impossible := impossible_of_stored(run.get("warnings"), run.get("stalls"), run):  # cpu 141%: 27 cores
        what = impossible.split(". Cause: ")[0]
        raise UsageError(f"run {run['run_id']}: {what}; what would hide its stalls cannot be told from it "
                         f"(`stash show {run['run_id']}` says why)")  # fmt: skip
    phases, times = phase_times(run)
    stalls = {stall["stall"]: checked_figure(stall) for stall in run["stalls"]}
    telemetry = None
    if "R2" in phases:
        telemetry = telemetry_frame(db_path, run["run_id"], phase="R2")
    return {
        "run_id": run["run_id"],
        "model": run.get("model"),
        "iteration_s": run["iteration_s"],
        # a run stopped before the job's own phase: its time is an earlier phase's, as `stash show` says
        "partial": partial_note(run, run.get("phases") or []),
        "cpu": cpu_answer(run, times, stalls, phases),
        "disk": disk_answer(run, phases, times, stalls, telemetry),
        "network": network_answer(db_path, run, stalls, target_share),
        "assumptions": [
            "CPU: pre-processing cost per sample is constant and splits evenly over loader processes",
            "disk: R2 was limited by disk reads; a cached fraction f serves a fraction f of reads",
            "network: the network stall scales with 1 / link bandwidth (latency not included)",
        ],
    }


def cpu_answer(run: dict, times: dict[str, float], stalls: dict[str, dict], phases: dict) -> dict[str, Any]:
    entry = stalls.get("cpu") or {}
    if entry.get("status") not in ("measured", "clamped_zero") or "R3" not in times:
        return unanswered(why_not(entry, "cpu", "R3" in times, "cached real-data phase (R3)"))
    t_sync = synthetic_step_s(times)
    if t_sync is None:
        return unanswered("not measured: no synthetic-data phase to compare with")
    if run.get("loader_workers") is None or not run.get("batch_size"):
        return unanswered(
            "not measured: the run's loader workers or batch are unknown (a script's runs read DataLoaders "
            "with different worker counts or batches, or a script profiled before Stash recorded them)"
        )
    t3 = times["R3"]
    batch = int(run["batch_size"])
    workers = int(run.get("workers_per_node") or 1)
    cores = _logical_cores(run)
    cores_per_worker = cores / workers if cores else None
    disk_s = max(0.0, seconds_of(stalls.get("disk")) or 0.0)  # a negative one measured nothing to add
    cpu_s = max(0.0, t3 - t_sync)
    loaders, parallel, sample_cpu_s = _loader_cost(run, t3, cpu_s, cores_per_worker)
    base = {
        "loader_workers": loaders,
        "cores_per_worker_available": cores_per_worker,
        "per_sample_cpu_ms": sample_cpu_s * 1e3,
        "cpu_stall_s": cpu_s,
    }
    if entry.get("status") == "clamped_zero" or not resolved(
        entry.get("seconds") or 0.0, entry.get("ci95_s")
    ):
        # Within the noise: no core count can be told from it, and none would make the step faster.
        return {
            **base,
            "per_sample_cpu_ms": None,  # R3 is then not the loaders' time: no figure per sample from it
            "status": "within the noise",
            "cores_per_worker_needed": None,
            "predicted_iteration_s": None,
            "predictions": [],
            "summary": "the CPU stall is within the noise of this run: more cores per worker cannot be told "
            "to make it faster (measure with a smaller --target-ci to resolve it)",
        }
    # The step as measured: R3 and the disk stall, or the run's own iteration where R3 came out slower (noise)
    now_s = min(t3 + disk_s, float(run["iteration_s"]))
    if hidden(cpu_s, entry, t3):
        return {
            **base,
            "status": "hidden already",
            "cores_per_worker_needed": max(parallel, 1) if loaders else 1,
            "predicted_iteration_s": now_s,
            "predictions": [],
            "summary": f"CPU stall is already hidden with {loaders} loader worker(s) per worker",
        }
    if step := unresolved_step(phases, times):  # 27 cores per worker, over an R0 of 0.63 ms ± 1.8 ms
        return step_noise_answer(base, step)
    needed = max(1, math.ceil(batch * sample_cpu_s / t_sync - 1e-9))
    predictions = []
    for k in sorted({1, max(parallel, 1), needed, needed + 1, *range(1, min(needed, 16) + 1)}):
        predicted_s = max(t_sync, batch * sample_cpu_s / k) + disk_s
        if k >= max(parallel, 1):  # as many cores as ran, or more, never make the step slower than measured
            predicted_s = min(predicted_s, now_s)
        predictions.append({"cores_per_worker": k, "iteration_s": predicted_s})
    machine = f"{needed * workers} cores per machine for {workers} worker(s)"
    if cores:
        machine += f"; this machine has {cores}"
    return {
        **base,
        "status": "answered",
        "cores_per_worker_needed": needed,
        "predicted_iteration_s": min(now_s, max(t_sync, batch * sample_cpu_s / needed) + disk_s),
        "predictions": predictions,
        "summary": (
            f"{needed} CPU cores per worker (as DataLoader workers) hide the CPU stall "
            f"({sample_cpu_s * 1e3:.2f} ms of loading per sample, taken as CPU work: a loader that waits on "
            f"storage is hidden by more loader workers, not more cores); {machine}"
        ),
    }


def cpu_stall_elsewhere(
    run: dict[str, Any], cores_per_worker: float, sync_s: float, profiled_per_worker: float | None = None
) -> tuple[float, float] | None:
    """(the CPU stall, the CPU seconds per sample) of a run's job on a machine with `cores_per_worker` cores
    for each worker and a step of `sync_s` with the data ready, by the model above: the run's loader workers,
    as many of them in parallel as there are cores, each as fast as the profiled machine's cores. The
    profiled machine's cores per worker: `profiled_per_worker` (say, its catalog vCPUs, to count both
    machines alike), else its fingerprint's. None where the run cannot tell: no R3 or no synchronous phase, a
    CPU stall hidden or within the noise (R3 is then not the loaders' time), or loading in the main process
    (0 loader workers: serial, whatever the cores), or loader workers or batch not recorded (a script's runs
    that disagree)."""
    _, times = phase_times(run)
    t_sync = synthetic_step_s(times)
    unknown = run.get("loader_workers") is None or not run.get("batch_size")
    if "R3" not in times or t_sync is None or cores_per_worker <= 0 or unknown:
        return None
    entry = next((stall for stall in run.get("stalls") or [] if stall.get("stall") == "cpu"), {})
    stall_s = max(0.0, times["R3"] - t_sync)
    seconds, ci95_s = entry.get("seconds") or 0.0, entry.get("ci95_s")
    measured = entry.get("status") == "measured" and resolved(seconds, ci95_s)
    if not measured or hidden(stall_s, entry, times["R3"]):
        return None
    if not profiled_per_worker:
        cores = _logical_cores(run)
        profiled_per_worker = cores / int(run.get("workers_per_node") or 1) if cores else None
    loaders, _, sample_cpu_s = _loader_cost(run, times["R3"], stall_s, profiled_per_worker)
    if loaders == 0:
        return None
    loading_s = int(run["batch_size"]) * sample_cpu_s / min(loaders, cores_per_worker)
    return max(0.0, loading_s - sync_s), sample_cpu_s


def _loader_cost(
    run: dict[str, Any], t3: float, cpu_s: float, cores_per_worker: float | None
) -> tuple[int, float, float]:
    """(loader workers, how many of them ran at once, CPU seconds per sample): loader workers in parallel up
    to the cores per worker give t3 = B c / parallel; the main process alone loads serially, cpu_s a batch."""
    batch = int(run["batch_size"])
    loaders = int(run["loader_workers"])
    if loaders == 0:
        return 0, 0, cpu_s / batch
    parallel = min(loaders, cores_per_worker) if cores_per_worker else loaders
    return loaders, parallel, parallel * t3 / batch


def disk_answer(
    run: dict[str, Any], phases: dict[str, dict], times: dict[str, float], stalls: dict[str, dict], telemetry
) -> dict[str, Any]:
    entry = stalls.get("disk") or {}
    if entry.get("status") not in ("measured", "clamped_zero") or "R2" not in times or "R3" not in times:
        has = "R2" in times and "R3" in times
        return unanswered(why_not(entry, "disk", has, "cold and cached real-data phases (R2, R3)"))
    t2, t3 = times["R2"], times["R3"]
    disk_s = max(0.0, t2 - t3)
    workers = int(run.get("workers_per_node") or 1)
    batch = int(run.get("batch_size") or 0)  # 0: unknown (a script's runs read different batches)
    sample_bytes, how = _sample_bytes(run, phases.get("R2"), telemetry)
    images = run.get("dataset_images")
    base = {
        "disk_stall_s": disk_s,
        "sample_bytes": sample_bytes,
        "sample_bytes_from": how,
        "dataset_images": images,
    }
    if within_noise(entry, t2, t2 - t3):  # neither hidden nor a size to cache can be told
        noise = "the disk stall is within the noise of this run: what caching would hide it cannot be told"
        unknown = {"cache_fraction_needed": None, "cache_bytes_needed": None, "predicted_iteration_s": None}
        return {**base, **unknown, "status": "within the noise",
                "summary": f"{noise} (a smaller --target-ci resolves it)"}  # fmt: skip
    if hidden(disk_s, entry, t2):
        return {
            **base,
            "status": "hidden already",
            "cache_fraction_needed": 0.0,
            "cache_bytes_needed": 0,
            "predicted_iteration_s": t2,
            "summary": "disk stall is already hidden",
        }
    fraction = disk_s / t2
    answer = {**base, "status": "answered", "cache_fraction_needed": fraction, "predicted_iteration_s": t3}
    cache_bytes = None
    if sample_bytes and images:
        cache_bytes = fraction * sample_bytes * images
        answer["dataset_bytes"] = sample_bytes * images
        answer["read_mbps_needed_without_cache"] = sample_bytes * batch * workers / t3 / 1e6 or None
        answer["read_mbps_measured"] = sample_bytes * batch * workers / t2 / 1e6 or None
    answer["cache_bytes_needed"] = cache_bytes
    size = f"{fraction:.0%}"
    if cache_bytes:
        size = f"{size_words(cache_bytes)} ({size} of the data set)"  # 0.94 MiB, not "0.00 GiB"
    answer["summary"] = f"caching {size} in memory hides the disk stall"
    memory = (run.get("fingerprint") or {}).get("memory_bytes")
    if cache_bytes and memory:
        answer["summary"] += f"; this machine has {memory / 2**30:.0f} GiB of memory"
    return answer


def network_answer(
    db_path: Path | str, run: dict[str, Any], stalls: dict[str, dict], target_share: float
) -> dict[str, Any]:
    entry = stalls.get("network") or {}
    if int(run.get("nodes") or 1) <= 1:
        return unanswered("not applicable: the run used one machine")
    if entry.get("status") == "invalid":
        return unanswered(why_not(entry, "network", True, ""))
    if entry.get("status") not in ("measured", "clamped_zero"):
        return unanswered("not measured: the run has no multi-machine synthetic phase (R1n)")
    iteration_s = float(run["iteration_s"])
    network_s = max(0.0, seconds_of(entry) or 0.0)
    rest_s = iteration_s - network_s
    if rest_s <= 0:  # a stored stall the iteration cannot hold: no bandwidth can be told from it
        return unanswered(
            f"not answerable: the stored network stall ({network_s:.4g} s) is not less than the iteration "
            f"({iteration_s:.4g} s)"
        )
    base_label, label_gbps = split_instance_label(run.get("instance"))
    gbps = spec_bandwidth_gbps(run.get("spec")) or label_gbps
    how = "emulated link" if gbps else None
    if gbps is None and base_label:
        instance = get_instance(db_path, base_label)
        catalog_gbps = finite_float(instance.get("network_gbps")) if instance else None
        if catalog_gbps:
            gbps, how = catalog_gbps, f"catalog entry of {base_label}"
            if "bursts up to" in str(instance.get("source") or ""):  # an AWS "up to" rate: its baseline
                how += ", its baseline: a profile of minutes may have run at its burst rate"
    base = {
        "network_stall_s": network_s,
        "bandwidth_gbps_now": gbps,
        "bandwidth_from": how,
        "target_share": target_share,
    }
    if within_noise(entry, iteration_s):  # 0.91 s ± 1.43 s (82% of the iteration) read "already hidden"
        unknown = dict.fromkeys(("bandwidth_factor_needed", "bandwidth_gbps_needed", "predicted_iteration_s"))
        noise = "the network stall is within the noise of this run: the bandwidth to hide it cannot be told"
        return {**base, **unknown, "status": "within the noise",
                "summary": f"{noise} (a smaller --target-ci resolves it)"}  # fmt: skip
    if hidden(network_s, entry, iteration_s):
        return {
            **base,
            "status": "hidden already",
            "bandwidth_factor_needed": 1.0,
            "bandwidth_gbps_needed": gbps,
            "predicted_iteration_s": iteration_s,
            "summary": "network stall is already hidden",
        }
    factor = network_s / (target_share * rest_s)
    predicted = rest_s * (1 + target_share) if factor > 1 else iteration_s
    needed = None if gbps is None else gbps * max(factor, 1.0)
    target = f"{target_share * 100:.3g}% of the rest of the iteration"
    if factor <= 1:  # at or below the target already: the current bandwidth is enough
        now = f"{gbps:g} Gbit/s per machine" if gbps is not None else "the current bandwidth"
        return {
            **base,
            "status": "within target",
            "bandwidth_factor_needed": 1.0,
            "bandwidth_gbps_needed": gbps,
            "predicted_iteration_s": iteration_s,
            "summary": f"network stall is {network_s / rest_s:.1%} of the rest of the iteration, within the "
            f"{target_share * 100:.3g}% target at {now}",
        }
    if needed is not None:
        summary = (
            f"{needed:.3g} Gbit/s per machine ({max(factor, 1):.3g}x today's {gbps:g} Gbit/s) "
            f"brings network stall to {target}" + (f" ({how})" if how and "burst" in how else "")
        )
    else:
        summary = f"{max(factor, 1):.3g}x the current bandwidth (unknown) brings network stall to {target}"
    return {
        **base,
        "status": "answered",
        "bandwidth_factor_needed": max(factor, 1.0),
        "bandwidth_gbps_needed": needed,
        "predicted_iteration_s": predicted,
        "summary": summary,
    }


def _logical_cores(run: dict[str, Any]) -> int | None:
    fingerprint = run.get("fingerprint") or {}
    cores = finite_float(fingerprint.get("cpu_cores_logical"))
    return int(cores) if cores is not None and cores > 0 else None


def _sample_bytes(run: dict[str, Any], r2: dict | None, telemetry) -> tuple[float | None, str]:
    """Mean bytes per sample: from the data set folder when it still exists, else from R2's disk reads."""
    dataset = run.get("dataset")
    if dataset and Path(dataset).is_dir():
        total, count = 0, 0
        for root, _, files in os.walk(dataset):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                    count += 1
                except OSError:
                    continue
        if count:
            return total / count, f"files in {dataset}"
    if telemetry is None or telemetry.empty or r2 is None:
        return None, "unknown"
    reads = telemetry[telemetry["metric"] == "disk_read_mbps"].sort_values("t_s")
    interval = r2.get("telemetry_interval_s")
    samples = (
        ((r2.get("warmup_iterations") or 0) + (r2.get("iterations") or 0))
        * int(run.get("batch_size") or 0)
        * int(run.get("workers_per_node") or 1)
    )
    if reads.empty or not interval or not samples:
        return None, "unknown"
    megabytes = float(reads["value"].fillna(0).sum()) * float(interval)
    if megabytes <= 0:
        return None, "unknown"
    return megabytes * 1e6 / samples, "disk reads during R2"
