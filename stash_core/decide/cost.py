"""What a training job costs: per iteration, per epoch and per training, on-demand and spot.

cost = time x hourly price of one instance x number of instances. A price that the catalog does not have is
reported as a status line ("no spot price for instance p3.8xlarge"), never replaced by a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stash_core.analysis.epochs import iterations_per_epoch
from stash_core.decide.catalog import check_stored_run, get_instance
from stash_core.errors import UsageError
from stash_core.store import get_run
from stash_core.units import finite_float

PRICINGS = ("on_demand", "spot")
_PRICE_COLUMN = {"on_demand": "on_demand_usd_per_h", "spot": "spot_usd_per_h"}


def hourly_price(
    instance: dict[str, Any] | None, name: str | None, pricing: str = "on_demand"
) -> tuple[float | None, str]:
    """(USD per hour of one instance, "ok") or (None, why there is no price)."""
    if pricing not in PRICINGS:
        raise UsageError(f"pricing must be one of {', '.join(PRICINGS)}, got {pricing!r}")
    label = name or "(none)"
    if not name:
        return None, "no price: the run has no instance label"
    if instance is None:
        return (
            None,
            f"no price for instance {label}: it is not in the catalog (add it with `stash instances add`)",
        )
    price = finite_float(instance.get(_PRICE_COLUMN[pricing]))
    if price is None:
        kind = "spot price" if pricing == "spot" else "on-demand price"
        return None, f"no {kind} for instance {label} (set one with `stash instances set`)"
    return price, "ok"


def training_cost(
    iteration_s: float | None,
    iterations_per_epoch: int | None,
    epochs: float,
    instance: dict[str, Any] | None,
    instance_name: str | None,
    instance_count: int = 1,
) -> dict[str, Any]:
    """Time and cost of iterations, one epoch and `epochs` epochs, for each pricing.

    Returns {"iteration_s", "epoch_s", "training_s", "training_h", "instance", "instance_count",
    "on_demand": {...}, "spot": {...}} where each pricing holds usd_per_h (all instances), iteration_usd,
    epoch_usd, training_usd and status ("ok" or why a figure is missing). Times that cannot be known
    (no iteration time, unknown epoch size) are None and so are the costs that depend on them.
    """
    epoch_count = finite_float(epochs)
    if epoch_count is None or epoch_count <= 0:
        raise UsageError(f"epochs must be a positive number, got {epochs!r}")
    if isinstance(instance_count, bool) or not isinstance(instance_count, int) or instance_count <= 0:
        raise UsageError(f"instance count must be a positive whole number, got {instance_count!r}")
    epoch_s = iteration_s * iterations_per_epoch if iteration_s is not None and iterations_per_epoch else None
    training_s = epoch_s * epoch_count if epoch_s is not None else None
    result: dict[str, Any] = {
        "iteration_s": iteration_s,
        "epoch_s": epoch_s,
        "training_s": training_s,
        "training_h": None if training_s is None else training_s / 3600.0,
        "epochs": epoch_count,
        "instance": instance_name,
        "instance_count": instance_count,
    }
    for pricing in PRICINGS:
        price, status = hourly_price(instance, instance_name, pricing)
        usd_per_h = None if price is None else price * instance_count
        entry = {
            "usd_per_h": usd_per_h,
            "iteration_usd": None,
            "epoch_usd": None,
            "training_usd": None,
            "status": status,
        }
        if usd_per_h is not None and iteration_s is None:
            entry["status"] = "no iteration time: the run did not complete"
        elif usd_per_h is not None:
            if iteration_s is not None:
                entry["iteration_usd"] = iteration_s * usd_per_h / 3600.0
            if epoch_s is not None:
                entry["epoch_usd"] = epoch_s * usd_per_h / 3600.0
                entry["training_usd"] = training_s * usd_per_h / 3600.0
            elif iteration_s is not None:
                entry["status"] = (
                    "ok per iteration; epoch unknown: the run has no data set size (give dataset images)"
                )
        result[pricing] = entry
    return result


def run_cost(
    db_path: Path | str, run_id: str, epochs: float = 1, dataset_images: int | None = None
) -> dict[str, Any]:
    """training_cost of a stored run on its instance (one instance per node), plus "run_id" and "model".

    The epoch is the run's own (iterations_per_epoch stored with it) unless `dataset_images` is given.
    A run whose machine contradicts its instance label (decide/catalog/labels.py) gets no price until the
    label is confirmed; "label_warning" says why (None when the label fits). UsageError when the run does
    not exist.
    """

    run = get_run(db_path, run_id)
    if run is None:
        raise UsageError(f"no run {run_id!r} in {db_path}")
    workers_total = (run.get("workers_per_node") or 1) * (run.get("nodes") or 1)
    if dataset_images is not None:
        per_epoch = iterations_per_epoch(dataset_images, run["batch_size"], workers_total)
    else:
        per_epoch = run.get("iterations_per_epoch")
    name = run.get("instance")
    instance = get_instance(db_path, name) if name else None
    label = check_stored_run(db_path, run)
    if not label.usable:
        instance = None
    result = training_cost(run.get("iteration_s"), per_epoch, epochs, instance, name, run.get("nodes") or 1)
    if not label.usable:
        for pricing in PRICINGS:
            result[pricing]["status"] = f"no price: {label.warning}"
    result["label_warning"] = label.warning
    result["run_id"] = run["run_id"]
    result["model"] = run.get("model")
    return result
