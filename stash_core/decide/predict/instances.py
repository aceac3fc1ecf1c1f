"""Predictions for every catalog instance (or a list): `stash predict` and the predicted options of
`stash recommend` and the Recommend and Compare pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from stash_core.decide.catalog import list_instances
from stash_core.decide.cells import plain_row
from stash_core.decide.predict.configuration import Predictor
from stash_core.decide.predict.validation import expected_errors
from stash_core.decide.reads import gpu_compute_profiles
from stash_core.errors import UsageError

PRECISIONS = ("fp32", "tf32", "amp")
COLUMNS = (
    "config", "instance", "accelerator", "instance_count", "workers_per_instance", "path", "source",
    "compute_s", "interconnect_s", "network_s", "iteration_s", "samples_per_s", "expected_error",
    "memory_needed_gb", "memory_gb", "basis", "note",
)  # fmt: skip


@dataclass
class Prediction:
    request: dict
    frame: pd.DataFrame
    not_predictable: list[str] = field(default_factory=list)
    expected_errors: dict = field(default_factory=dict)


def catalog_rows(db_path: Path | str, instances: list[str] | None) -> dict[str, dict]:
    """The catalog rows to predict, by name; UsageError for a name not in the catalog."""
    catalog = list_instances(db_path)
    rows = {row["name"]: plain_row(row) for row in catalog.to_dict(orient="records")}
    if instances:
        unknown = sorted(set(instances) - set(rows))
        if unknown:
            raise UsageError(f"unknown instance(s) {', '.join(unknown)}: see `stash instances list`")
        rows = {name: rows[name] for name in instances}
    return rows


def predictor_for(
    db_path: Path | str, model: str, batch_size: int, catalog: dict[str, dict], precision: str = "fp32"
) -> Predictor:
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    profiles = gpu_compute_profiles(db_path).to_dict(orient="records")
    everything = {row["name"]: plain_row(row) for row in list_instances(db_path).to_dict(orient="records")}
    return Predictor(model, batch_size, {**everything, **catalog}, profiles, precision)


def predict_instances(
    db_path: Path | str,
    model: str,
    batch_size: int,
    instances: list[str] | None = None,
    workers_per_instance: int | None = None,
    max_instances: int = 1,
    precision: str = "fp32",
) -> Prediction:
    """One row per configuration that can be predicted; a line per instance that cannot, with the reason."""
    catalog = catalog_rows(db_path, instances)
    predictor = predictor_for(db_path, model, batch_size, catalog, precision)
    rows, refused = [], []
    for name, instance in catalog.items():
        gpus = instance.get("accelerator_count") or 0
        if gpus <= 0:
            refused.append(f"{name}: not predictable - no accelerator (CPU instances need a profile)")
            continue
        workers = min(workers_per_instance or gpus, gpus)
        for count in range(1, max_instances + 1):
            result = predictor.predict(name, workers, count)
            if isinstance(result, str):
                if result not in refused:
                    refused.append(result)
                break
            label = f"{count} x {name}" + (f" ({workers} of {gpus} GPUs)" if workers != gpus else "")
            rows.append(
                {
                    "config": label,
                    "instance": name,
                    "accelerator": result.accelerator,
                    "instance_count": count,
                    "workers_per_instance": workers,
                    "path": result.path,
                    "source": "measured" if result.path == "measured" else "predicted",
                    "compute_s": result.compute_s,
                    "interconnect_s": result.interconnect_s,
                    "network_s": result.network_s,
                    "iteration_s": result.iteration_s,
                    "samples_per_s": batch_size * workers * count / result.iteration_s,
                    "expected_error": result.expected_error,
                    "memory_needed_gb": result.memory_needed_gb,
                    "memory_gb": result.memory_gb,
                    "basis": result.basis,
                    "note": "; ".join(result.notes),
                }
            )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if len(frame):
        frame = frame.sort_values("samples_per_s", ascending=False).reset_index(drop=True)
    shape = "x".join(str(size) for size in predictor.cost.input_shape)
    request = {"model": model, "batch_size": batch_size, "precision": precision, "input_shape": shape}
    return Prediction(request, frame, refused, expected_errors())
