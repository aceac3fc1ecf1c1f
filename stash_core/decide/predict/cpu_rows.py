"""The rows of a catalog's CPU instances: a CPU machine's step is measured, never predicted, so each has the
configurations its stored profiles of the job measured, and every configuration asked but not profiled is
named with the profile that would give it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.catalog import stored_label_checks
from stash_core.decide.predict.configuration import (
    ConfigPrediction,
    Predictor,
    measured_interval_s,
    profile_shape,
)
from stash_core.decide.predict.profile_arithmetic import machine_name, other_input_line
from stash_core.decide.predict.profile_checks import other_code
from stash_core.terminal import shell_word
from stash_core.units import finite_float

# A CPU machine's step is measured, never predicted: the phrase every reason of a CPU instance without a row
# has, in `predict` and `recommend`, which the pages count as "no GPU" (views/recommend.py)
CPU_MEASURED = "a CPU machine is measured, never predicted"
NOT_PROFILED_COUNTS = "machine(s) not profiled"  # other machine counts of a profiled CPU instance


def no_gpu_reason(name: str) -> str:
    """Why a CPU instance without a profile of the job has no row, and the profile that would give it one."""
    return (
        f"{name}: no GPU and no profile of this job on it ({CPU_MEASURED}: profile the job there with "
        f"--instance {shell_word(name)})"
    )


def cpu_instance_rows(
    name: str, on_cpus: dict[str, list[ConfigPrediction]] | None, max_instances: int,
    workers_per_instance: int | None,
) -> tuple[list[ConfigPrediction], list[str]]:  # fmt: skip
    """A CPU instance's rows (`on_cpus`: the configurations its profiles measured, by instance; None for a
    script's run, whose profiles on CPU machines are not read here) within the asked machines and workers,
    and a line for what was asked and has no row."""
    profiled = (on_cpus or {}).get(name, [])
    kept = [found for found in profiled if found.instance_count <= max_instances
            and workers_per_instance in (None, found.workers_per_instance)]  # fmt: skip
    if on_cpus is None:
        return kept, [f"{name}: not predicted - {CPU_MEASURED}"]
    if name in on_cpus and not profiled:
        return kept, [
            f"{name}: not predicted - {CPU_MEASURED}, and its profiles of this job lack a figure a row needs "
            "(compute, or the interconnect or network stall of their workers and machines): profile it with "
            "those stalls"
        ]
    if profiled and not kept:
        shapes = ", ".join(sorted({_shape(found) for found in profiled}))
        return kept, [f"{name}: not predicted - {CPU_MEASURED}, and no profile of this job on it has the "
                      f"workers and machines asked (it ran {shapes})"]  # fmt: skip
    if not profiled:
        return kept, [no_gpu_reason(name)]
    return kept, _unprofiled_counts(name, kept, max_instances)


def _unprofiled_counts(name: str, kept: list[ConfigPrediction], max_instances: int) -> list[str]:
    """A line for each profiled worker count whose other machine counts (up to `max_instances`) were not
    profiled: left out of the rows without a word, where `recommend` estimates them from a profile."""
    lines = []
    for workers in sorted({found.workers_per_instance for found in kept}):
        ran = {found.instance_count for found in kept if found.workers_per_instance == workers}
        missing = [count for count in range(1, max_instances + 1) if count not in ran]
        if missing:
            counts = ", ".join(str(count) for count in missing)
            lines.append(
                f"{name}: {counts} {NOT_PROFILED_COUNTS} ({workers} worker(s) each), not predicted - "
                f"{CPU_MEASURED}: profile them (`stash profile --nodes N`), or `stash recommend` estimates "
                "them from this profile's stalls"
            )
    return lines


def cpu_profiles(
    db_path: Path | str, predictor: Predictor, catalog: dict[str, dict], everything: dict[str, dict],
    stored: pd.DataFrame,
) -> tuple[dict[str, list[ConfigPrediction]], list[str]]:  # fmt: skip
    """The configurations of the catalog's CPU instances that a stored profile of the predictor's job
    measured (its model, batch, input shape; in FP32 with the zoo's habits, as profiles run), newest first
    and one per worker and machine count, by instance, and a line for each profile set aside because it ran
    other contents of the job's model file. Profiles whose machine contradicts their instance label are left
    out, as `recommend` leaves them out; one that ran another input shape is named, as recommend names it.
    `stored`: measured_profiles of the predictor's model and batch."""
    names = {name for name, row in catalog.items() if (row.get("accelerator_count") or 0) <= 0}
    # a model built in 16 bits ran in its own precision, whatever the job asks (features.run_precision)
    as_built = predictor.precision == "fp32" or predictor.default_arithmetic or predictor.cost.half_weights
    job_as_profiled = as_built and predictor.job.is_default(predictor.default_optimizer)
    if not names or not job_as_profiled or stored.empty:
        return {}, []
    stored = stored[stored["instance"].isin(names)]
    changed = other_code(predictor.model, stored.to_dict(orient="records"))
    stored = stored[~stored["run_id"].isin(changed)]
    if stored.empty:
        return {}, list(changed.values())
    checks = stored_label_checks(db_path, list(stored["run_id"]), everything)
    found: dict[str, list[ConfigPrediction]] = {}
    seen, other_input = set(), []
    for row in stored.to_dict(orient="records"):
        if pd.isna(row["workers_per_node"]) or pd.isna(row["nodes"]):
            continue  # a row edited or imported without its counts: no configuration to name
        key = (row["instance"], int(row["workers_per_node"]), int(row["nodes"]))
        ran_with, shape = profile_shape(row) or predictor.default_shape, predictor.cost.input_shape
        if ran_with is None or tuple(ran_with) != tuple(shape):
            if ran_with is not None:  # named, as a GPU profile's is
                other_input.append(other_input_line(row, ran_with, shape))
            continue
        if key in seen or not checks[row["run_id"]].usable:
            continue
        measured = _measured_on_cpu(row, key[1], key[2])
        found.setdefault(key[0], [])  # profiled: a profile lacking a figure it needs still is one
        if measured is not None:
            seen.add(key)
            found[key[0]].append(measured)
    return found, list(changed.values()) + other_input


def _measured_on_cpu(row: dict[str, Any], workers: int, count: int) -> ConfigPrediction | None:
    """A CPU profile's configuration as a row: compute, interconnect and network as it measured them (one
    worker has no interconnect stall, one machine no network stall); None when one it needs is missing."""
    compute_s = finite_float(row.get("compute_s"))
    interconnect_s = finite_float(row.get("interconnect_s")) if workers > 1 else 0.0
    network_s = finite_float(row.get("network_s")) if count > 1 else 0.0
    if compute_s is None or compute_s <= 0 or interconnect_s is None or network_s is None:
        return None
    notes = ["CPU machine: compute, interconnect and network as profiled, CPU and disk stalls left out as on "
             "every row, memory not checked"]  # fmt: skip
    step_s = compute_s + interconnect_s + network_s
    return ConfigPrediction(
        row["instance"], None, count, workers, "measured", f"profile {row['run_id']}", compute_s,
        interconnect_s, network_s, None, None, None, notes, measured=True, run_id=row["run_id"],
        iteration_ci95_s=measured_interval_s(row, step_s),
    )  # fmt: skip


def _shape(found: ConfigPrediction) -> str:
    workers = f"{found.workers_per_instance} worker(s) per machine"
    return workers if found.instance_count == 1 else f"{workers} on {found.instance_count} machines"


def off_their_gpus(
    measured: pd.DataFrame, everything: dict[str, dict[str, Any]]
) -> tuple[pd.DataFrame, list[str]]:
    """The profiles that ran where their instance's job runs, and a line for each that did not: a CPU
    profile (--device cpu) of an instance with GPUs measured another job; `predict` and `recommend` set it
    aside."""
    if measured.empty:
        return measured, []
    gpus = {name: row.get("accelerator_count") or 0 for name, row in everything.items()}
    off = [
        str(device or "").startswith("cpu") and (gpus.get(instance) or 0) > 0
        for device, instance in zip(measured["device"], measured["instance"], strict=True)
    ]
    lines = [
        f"profile {run_id} on {machine_name(instance)}: set aside, it ran on the CPU (--device cpu) and the "
        "instance's job runs on its GPUs"
        for run_id, instance, cpu in zip(measured["run_id"], measured["instance"], off, strict=True)
        if cpu
    ]
    return measured[[not cpu for cpu in off]].reset_index(drop=True), lines
