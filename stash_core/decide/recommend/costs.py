"""The time and money of one configuration: iterations per epoch, training hours, dollars, and its label.

Epoch = (images // workers) // batch iterations (stash_core.analysis.epochs, as the profiled loop counts it);
training = epochs x epoch; cost = training hours x hourly price of one instance x instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stash_core.analysis.epochs import iterations_per_epoch
from stash_core.decide.predict.configuration import measured_interval_s
from stash_core.habits import TrainingJob
from stash_core.store.catalog_seed import source_region
from stash_core.units import STALLS, finite_float

STALL_NAMES = STALLS
OPTION_COLUMNS = (
    "config",
    "instance",
    "accelerator",
    "instance_count",
    "gpus_per_instance",
    "workers_per_instance",
    "workers_total",
    "source",
    "path",
    "run_id",
    "basis",
    "iteration_s",
    "iteration_ci95_s",
    "samples_per_s",
    "iterations_per_epoch",
    "epoch_s",
    "training_h",
    "usd_per_h",
    "price_date",
    "price_region",
    "price_source",
    "training_usd",
    "expected_error",
    "unvalidated",
    "comm_error",
    "memory_needed_gb",
    "memory_gb",
    *(f"{stall}_s" for stall in STALL_NAMES),
    "meets_time",
    "meets_cost",
    "feasible",
    "pareto",
    "rank",
    "note",
)


@dataclass(frozen=True)
class RentalJob:
    """The training to rent instances for: a model at a per-worker batch size, input shape and precision,
    epochs of a data set, on one pricing."""

    model: str
    batch_size: int
    epochs: float
    dataset_images: int
    pricing: str  # "on_demand" | "spot"
    precision: str = "fp32"  # "fp32" | "tf32" | "amp" | "pytorch" (PyTorch's own for the model)
    input_shape: tuple[int, ...] | None = None  # one sample; None: the model's default
    habits: TrainingJob = field(default_factory=TrainingJob)  # memory format, optimizer, attention


@dataclass
class Estimate:
    """The iteration time of one configuration, its stalls, and where the figure comes from."""

    source: str  # "measured" | "predicted"
    run_id: str | None
    basis: str
    iteration_s: float
    stalls: dict[str, float | None]
    expected_error: float | None = None
    notes: list[str] = field(default_factory=list)
    unvalidated: bool = False  # the expected error has no held-out figure behind it (a wider guess)
    path: str = ""  # how compute was had: "measured", "profile" (of this GPU), "scaled", "roofline"
    memory_needed_gb: float | None = None  # of one GPU, where the step model checked it
    memory_gb: float | None = None
    comm_error: float | None = None  # the step's communication's held-out error (several GPUs, predicted)
    iteration_ci95_s: float | None = None  # a measured step's 95% half-width (its profile's; None: predicted)


def no_full_step(job: RentalJob, workers_total: int) -> str | None:
    """Why an epoch of the job on `workers_total` workers holds no step of the batch asked for (each worker's
    shard of the data set is less than one batch: its steps would train a smaller batch, another job than
    the one predicted); None when it holds one."""
    if job.dataset_images // workers_total >= job.batch_size:
        return None
    return (f"an epoch of {job.dataset_images:,} samples over {workers_total} workers gives each fewer than "
            f"one batch of {job.batch_size} (a smaller batch is another job): no full step")  # fmt: skip


def option_row(
    job: RentalJob,
    name: str,
    instance: dict[str, Any],
    count: int,
    workers: int,
    estimate: Estimate,
    price: float | None,
    price_status: str,
) -> dict[str, Any]:
    """One row of OPTION_COLUMNS (less the ranking columns) for `count` instances with `workers` each."""
    # the whole data set each epoch: at 2,000 images, 16 workers of 64 dropped half of it and read as cheaper
    per_epoch = iterations_per_epoch(job.dataset_images, job.batch_size, workers * count, drop_last=False)
    epoch_s = per_epoch * estimate.iteration_s
    training_h = epoch_s * job.epochs / 3600.0
    usd_per_h = None if price is None else price * count
    notes = estimate.notes if price is not None else [*estimate.notes, price_status]
    region = instance.get("region") or source_region(instance.get("source"))  # an older database: none stored
    return {
        "config": config_label(name, instance, count, workers),
        "instance": name,
        "accelerator": instance.get("accelerator"),
        "instance_count": count,
        "gpus_per_instance": instance.get("accelerator_count") or 0,
        "workers_per_instance": workers,
        "workers_total": workers * count,
        "source": estimate.source,
        "path": estimate.path or estimate.source,
        "run_id": estimate.run_id,
        "basis": estimate.basis,
        "iteration_s": estimate.iteration_s,
        "iteration_ci95_s": estimate.iteration_ci95_s,
        "samples_per_s": job.batch_size * workers * count / estimate.iteration_s,
        "iterations_per_epoch": per_epoch,
        "epoch_s": epoch_s,
        "training_h": training_h,
        "usd_per_h": usd_per_h,
        "price_date": None if price is None else instance.get("price_date"),
        "price_region": None if price is None else region,
        "price_source": None if price is None else instance.get("source"),
        "training_usd": None if usd_per_h is None else training_h * usd_per_h,
        "expected_error": estimate.expected_error,
        "unvalidated": estimate.unvalidated,
        "comm_error": estimate.comm_error,
        "memory_needed_gb": estimate.memory_needed_gb,
        "memory_gb": estimate.memory_gb,
        **{f"{stall}_s": estimate.stalls.get(stall) for stall in STALL_NAMES},
        "note": "; ".join(notes),
    }


def config_label(name: str, instance: dict[str, Any], count: int, workers: int) -> str:
    """'2 x p3.8xlarge', with the GPUs (or CPU workers) used of each when that is not all of them."""
    accelerators = instance.get("accelerator_count") or 0
    label = f"{count} x {name}"
    if accelerators and workers != accelerators:
        label += f" ({workers} of {accelerators} GPUs each)"
    elif not accelerators:
        label += f" ({workers} workers each)"
    return label


def measured_stalls(row: dict[str, Any]) -> dict[str, float | None]:
    """A profile row's five stalls, 0 for those its layout has none of."""
    stalls = {stall: finite_float(row.get(f"{stall}_s")) for stall in STALL_NAMES}
    # One machine has no network stall and one worker no interconnect stall: 0, not "not measured"
    if int(row.get("nodes") or 1) == 1 and stalls["network"] is None:
        stalls["network"] = 0.0
    if int(row.get("workers_per_node") or 1) == 1 and stalls["interconnect"] is None:
        stalls["interconnect"] = 0.0
    return stalls


def step_remainder_s(row: dict[str, Any]) -> float:
    """A profile's measured step less its named stalls (0 within REMAINDER_SAID of the step)."""
    named_s = sum(value for value in measured_stalls(row).values() if value is not None)
    left_s = float(row["iteration_s"]) - named_s
    return left_s if abs(left_s) > REMAINDER_SAID * float(row["iteration_s"]) else 0.0


REMAINDER_SAID = 0.01  # a share of the step below which the stalls' sum and the step are taken as one


def measured_estimate(row: dict[str, Any]) -> Estimate:
    """A stored profile's step as an option's estimate, with what it did not measure."""
    stalls = measured_stalls(row)
    notes = ["data stalls not profiled (synthetic data only)"] if data_not_profiled(row) else []
    iteration_s, remainder_s = float(row["iteration_s"]), step_remainder_s(row)
    if remainder_s:  # the step is measured whole (R2); its stalls are differences of runs
        notes.append(
            f"its stalls add up to {iteration_s - remainder_s:.4g} s of the measured "
            f"{iteration_s:.4g} s step; {remainder_s:+.4g} s is not separated into a stall"
        )
    return Estimate(
        "measured", row["run_id"], f"profile {row['run_id']}", iteration_s, stalls, None, notes,
        iteration_ci95_s=measured_interval_s(row, iteration_s),
    )  # fmt: skip


def communication_unmeasured(row: dict[str, Any]) -> bool:
    """A profile of several workers or machines whose interconnect or network stall it did not measure (e.g.
    --stalls compute): its step is one worker's, not the configuration's."""
    workers, nodes = int(row.get("workers_per_node") or 1), int(row.get("nodes") or 1)
    return (workers > 1 and finite_float(row.get("interconnect_s")) is None) or (
        nodes > 1 and finite_float(row.get("network_s")) is None
    )


def data_not_profiled(row: dict[str, Any]) -> bool:
    return all(row.get(f"{stall}_status") in (None, "not_measured") for stall in ("cpu", "disk"))


def step_error(row: dict[str, Any]) -> float | None:
    """The stated error of a row's step: its compute path's and its communication's, both fractions of the
    step, added (the ranking's ties and the recommendation's ± use it); None where neither is stated."""
    parts = [finite_float(row.get(name)) for name in ("expected_error", "comm_error")]
    known = [part for part in parts if part is not None]
    return sum(known) if known else None
