"""Predictions for every catalog instance (or a list): `stash predict` and the predicted options of
`stash recommend` and the Recommend and Compare pages; `stash predict --script-run` goes through the same
rows with script.py's predictor."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from stash_core.catalog import list_instances, stale_catalog_warning
from stash_core.catalog.accelerators import (
    PRECISIONS,
    Accelerator,
    accelerator_table,
    find_accelerator,
    match_accelerator,
)
from stash_core.catalog.unknown_names import unknown_names_note
from stash_core.cells import plain_row
from stash_core.decide.predict.catalog_fixes import catalog_fixes
from stash_core.decide.predict.configuration import ConfigPrediction, Predictor
from stash_core.decide.predict.cpu_rows import cpu_instance_rows, cpu_profiles, off_their_gpus
from stash_core.decide.predict.profile_arithmetic import DEFAULT_PRECISION
from stash_core.decide.predict.profile_checks import profiles_that_hold
from stash_core.decide.predict.refusals import refusal_json
from stash_core.decide.predict.script import ScriptPredictor, refuse_profiled_script, script_run
from stash_core.decide.predict.validation import expected_errors
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob, layout_kind
from stash_core.store.reads import gpu_compute_profiles, measured_profiles
from stash_core.zoo_names import canonical_model

COLUMNS = (
    "config", "instance", "accelerator", "instance_count", "gpus_per_instance", "workers_per_instance",
    "workers", "path", "source", "compute_s", "interconnect_s", "network_s", "iteration_s",
    "iteration_ci95_s", "samples_per_s", "expected_error", "unvalidated", "comm_error", "memory_needed_gb",
    "memory_gb", "basis", "note",
)  # fmt: skip
class ConfigurationPredictor(Protocol):
    def predict(self, name: str, workers: int, count: int) -> ConfigPrediction | str: ...


@dataclass
class Prediction:
    """The job asked (request), one row per predicted configuration (frame, COLUMNS), and a line per instance
    or configuration that could not be predicted, with its reason (not_predictable: 'NAME: reason')."""

    request: dict
    frame: pd.DataFrame
    not_predictable: list[str] = field(default_factory=list)
    expected_errors: dict = field(default_factory=dict)
    # the job's stored profiles that measured another precision, each with why
    profiles_set_aside: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # catalog rows an older Stash seeded (see catalog.py)

    def to_json(self) -> dict[str, Any]:
        """{"job": ..., "predictions": [...], "not_predicted": [{"instance", "reason"}], "profiles_set_aside":
        [line], "warnings": [line]}: plain JSON values, None for a figure that is not known (never NaN)."""
        return {
            "job": dict(self.request),
            "predictions": [_json_prediction(plain_row(row)) for row in self.frame.to_dict(orient="records")],
            "not_predicted": [refusal_json(line) for line in self.not_predictable],
            "profiles_set_aside": list(self.profiles_set_aside),
            "warnings": list(self.warnings),
        }


def _json_prediction(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "instance": row["instance"],
        "accelerator": row["accelerator"],
        "instance_count": row["instance_count"],
        "gpus": row["gpus_per_instance"],
        "workers_per_instance": row["workers_per_instance"],
        "workers": row["workers"],
        "path": row["path"],
        "source": row["source"],
        "step_s": row["iteration_s"],
        "step_ci95_s": row["iteration_ci95_s"],  # a step measured whole: its profile's 95% half-width
        "samples_per_s": row["samples_per_s"],
        "expected_error": row["expected_error"],
        "unvalidated": bool(row["unvalidated"]),
        "comm_expected_error": row["comm_error"],
        "memory_gb": row["memory_gb"],
        "memory_needed_gb": row["memory_needed_gb"],
        "compute_s": row["compute_s"],
        "interconnect_s": row["interconnect_s"],
        "network_s": row["network_s"],
        "basis": row["basis"],
        "notes": note_list(row["note"]),
    }


def note_list(joined: str | None) -> list[str]:
    """The notes of a row's note text (joined with "; "), each whole: a "; " inside parentheses is part of
    its note ("predicted (uncalibrated wire time: ...; error unknown)" was cut in two)."""
    notes, depth, start = [], 0, 0
    text = joined or ""
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth <= 0 and text.startswith("; ", index):
            notes.append(text[start:index])
            start = index + 2
    notes.append(text[start:])
    return [note for note in notes if note]


# Row notes that change what a row's figures mean, said beside them in tables (the others are JSON's): a
# note's start -> the words a table says
MEANING_NOTES = {
    "bfloat16 on a GPU without BF16": "bfloat16 on a GPU without BF16 matrix units: its products on the FP32 "
    "cores",
    "overhead-bound": "overhead-bound: the host's dispatch of every kernel, not the GPU, sets the step",
    "TF32 asked on a GPU without TF32": "TF32 asked on a GPU without TF32 units: its products in FP32",
}  # fmt: skip


def meaning_notes(joined: str | None) -> list[str]:
    """The MEANING_NOTES words of a row's note text (note_list's notes that start with one)."""
    notes = note_list(joined)
    return [words for start, words in MEANING_NOTES.items() if any(note.startswith(start) for note in notes)]


def gpus_used_cell(instance_count: int, workers_per_instance: int, gpus_per_instance: int) -> str:
    """GPUs used of each instance's, times the instances: '8/8', '1/8', '2x8/8'; a CPU machine's worker
    processes: '2 CPU' (the tables of predict and the Recommend page)."""
    workers, gpus = workers_per_instance, gpus_per_instance
    used = f"{workers}/{gpus}" if gpus else f"{workers} CPU"
    return used if instance_count == 1 else f"{instance_count}x{used}"


def all_catalog_rows(db_path: Path | str) -> dict[str, dict]:
    """Every catalog row (stored and built-in), by name."""
    return {row["name"]: plain_row(row) for row in list_instances(db_path).to_dict(orient="records")}


def catalog_rows(
    db_path: Path | str,
    instances: list[str] | None,
    gpus: list[str] | None = None,
    everything: dict[str, dict] | None = None,
) -> dict[str, dict]:
    """The catalog rows to predict, by name: the named ones, and of those (or of all) the ones whose GPU is
    one of `gpus`; UsageError for a name not in the catalog, a GPU not in the accelerator table, or a GPU
    no instance of the selection has. `everything`: all_catalog_rows when already read."""
    rows = dict(everything if everything is not None else all_catalog_rows(db_path))
    if instances:
        unknown = sorted(set(instances) - set(rows))
        if unknown:
            raise UsageError(
                f"unknown instance(s) {', '.join(unknown)}{unknown_names_note(unknown, rows)}: see "
                "`stash instances list`"
            )
        rows = {name: rows[name] for name in instances}
    if gpus:
        wanted = {variant for name in gpus for variant in gpu_variants(name)}
        rows = {
            name: row
            for name, row in rows.items()
            if (found := find_accelerator(row.get("accelerator"))) is not None and found.name in wanted
        }
        if not rows:
            raise UsageError(
                f"no instance{' of those named' if instances else ' in the catalog'} has "
                f"{' or '.join(sorted(wanted))}: see `stash instances list`"
            )
    return rows


def gpu_variants(name: str) -> tuple[str, ...]:
    """Every accelerator a GPU name means: a family (A100, H100, V100) means all its variants (memory sizes,
    SXM, PCIe, NVL); a full name, its one row. UsageError for a name the table does not know."""
    _known_gpu(name)
    found = match_accelerator(name)
    assert found is not None
    return found.candidates


def _known_gpu(name: str) -> Accelerator:
    found = find_accelerator(name)
    if found is None:
        known = sorted({accelerator.name for accelerator in accelerator_table().values()})
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UsageError(f"unknown GPU {name!r}{hint}: not in Stash's accelerator table")
    return found


def whole_catalog(
    db_path: Path | str, catalog: dict[str, dict], everything: dict[str, dict] | None = None
) -> dict[str, dict]:
    """Every catalog row (the profiles' instances too), with the rows given over them."""
    return {**(everything if everything is not None else all_catalog_rows(db_path)), **catalog}


def check_precision(precision: str) -> None:
    if precision not in (DEFAULT_PRECISION, *PRECISIONS):
        raise UsageError(
            f"precision must be one of {', '.join((DEFAULT_PRECISION, *PRECISIONS))}, got {precision!r}"
        )


def predictor_for(
    db_path: Path | str,
    model: str,
    batch_size: int,
    catalog: dict[str, dict],
    precision: str = "fp32",
    input_shape: tuple[int, ...] | None = None,
    everything: dict[str, dict] | None = None,
    job: TrainingJob | None = None,
) -> Predictor:
    """The Predictor of one job (its step counted once) over `catalog` and the stored GPU profiles."""
    check_precision(precision)
    refuse_profiled_script(model)
    # Each profile stands for the precision it ran in (profile_arithmetic.py; the Predictor sorts them).
    # No database file: no profiles (reading one would build an empty database in memory first).
    stored = Path(db_path).exists()
    profiles = gpu_compute_profiles(db_path).to_dict(orient="records") if stored else []
    rows = whole_catalog(db_path, catalog, everything)
    profiles, mislabelled = profiles_that_hold(db_path, model, batch_size, profiles, rows)
    return Predictor(model, batch_size, rows, profiles, precision, input_shape=input_shape, job=job,
                     mislabelled=mislabelled)  # fmt: skip


def predict_instances(
    db_path: Path | str,
    model: str,
    batch_size: int,
    instances: list[str] | None = None,
    workers_per_instance: int | None = None,
    max_instances: int = 1,
    precision: str = "fp32",
    input_shape: tuple[int, ...] | None = None,
    gpus: list[str] | None = None,
    job: TrainingJob | None = None,
) -> Prediction:
    """One row per configuration that can be predicted; a line per instance that cannot, with the reason.

    The step is counted once (Predictor: model, batch, input shape, precision) and reused for every
    instance; UsageError for an unknown model, instance or GPU, or a shape the model cannot take."""
    model = canonical_model(model)  # `ResNet18` finds the profiles of resnet18
    everything = all_catalog_rows(db_path)  # read once for the selection and the profiles' instances
    catalog = catalog_rows(db_path, instances, gpus, everything)
    predictor = predictor_for(db_path, model, batch_size, catalog, precision, input_shape, everything, job)
    # the job's stored profiles, read once: CPU machines' rows, and CPU runs of GPU instances set aside
    stored = measured_profiles(db_path, model, batch_size) if Path(db_path).exists() else pd.DataFrame()
    on_cpus, cpu_aside = cpu_profiles(db_path, predictor, catalog, everything, stored)
    frame, refused = prediction_rows(
        predictor, catalog, batch_size, workers_per_instance, max_instances, on_cpus
    )
    request = {
        "model": model, "batch_size": batch_size, "input_shape": list(predictor.cost.input_shape),
        "precision": predictor.precision_label, "precision_why": predictor.precision_why,
        "workers_per_instance": workers_per_instance or "all GPUs",
        "max_instances": max_instances, **predictor.job.to_json(
            layout_kind(predictor.cost.kind, predictor.cost.input_shape), predictor.default_optimizer,
            predictor.attends,
        ),
        **({"gpus": sorted({variant for name in gpus for variant in gpu_variants(name)})} if gpus else {}),
        "habits": predictor.job.describe(
            layout_kind(predictor.cost.kind, predictor.cost.input_shape), predictor.default_optimizer,
            predictor.attends,
        ),
    }  # fmt: skip
    _, off_gpus = off_their_gpus(stored, everything)  # said as `recommend` says it
    set_aside = predictor.mislabelled + cpu_aside + off_gpus + predictor.set_aside()
    warnings = _catalog_warnings(db_path, catalog)
    return Prediction(request, frame, refused, expected_errors(), set_aside, warnings)


def predict_script_run(
    db_path: Path | str,
    run_id: str,
    instances: list[str] | None = None,
    workers_per_instance: int | None = None,
    max_instances: int = 1,
    precision: str = "fp32",
) -> Prediction:
    """predict_instances for a profiled script: its run's compute scaled by the GPUs' ratio (script.py);
    UsageError when the run cannot be a base (not a script, not on a GPU, its GPU not in the table)."""
    check_precision(precision)
    why = None
    if precision == DEFAULT_PRECISION:  # a script's operators are not counted: its share of cuDNN unknown
        precision, why = "fp32", "a script's arithmetic is not counted: FP32; --precision tf32 for a CNN's"
    catalog = catalog_rows(db_path, instances)
    base = script_run(db_path, run_id, whole_catalog(db_path, catalog))
    predictor = ScriptPredictor(base, catalog, precision)
    frame, refused = prediction_rows(predictor, catalog, base.batch_size, workers_per_instance, max_instances)
    request = {
        "model": base.name, "batch_size": base.batch_size, "input_shape": None, "precision": precision,
        "precision_why": why,
        "workers_per_instance": workers_per_instance or "all GPUs", "max_instances": max_instances,
        "script_run": base.run_id, "measured_on": base.accelerator.name,
    }  # fmt: skip
    warnings = _catalog_warnings(db_path, catalog)
    return Prediction(request, frame, refused, expected_errors(), warnings=warnings)


def _catalog_warnings(db_path: Path | str, catalog: dict[str, dict]) -> list[str]:
    """The catalog rows among those predicted for that an older Stash seeded, as a warning."""
    stale = stale_catalog_warning(db_path, catalog)
    return [stale] if stale else []


def prediction_rows(
    predictor: ConfigurationPredictor,
    catalog: dict[str, dict],
    batch_size: int | None,
    workers_per_instance: int | None,
    max_instances: int,
    on_cpus: dict[str, list[ConfigPrediction]] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The predicted configurations of each catalog instance (1..max_instances of it), fastest first, and a
    line for every instance that could not be predicted, with the reason. A CPU instance has the rows its
    profiles of the job measured (`on_cpus`, by instance), never a prediction."""
    rows, refused = [], []
    for name, instance in catalog.items():
        gpus = instance.get("accelerator_count") or 0
        if gpus <= 0:
            kept, reasons = cpu_instance_rows(name, on_cpus, max_instances, workers_per_instance)
            rows += [_row(found, 0, batch_size) for found in kept]
            refused += reasons
            continue
        if workers_per_instance is not None and workers_per_instance > gpus:
            asked = workers_per_instance
            refused.append(f"{name}: not predicted - it has {gpus} GPU(s), the job uses {asked} per machine")
            continue
        workers = workers_per_instance or gpus
        for count in range(1, max_instances + 1):
            result = predictor.predict(name, workers, count)
            if isinstance(result, str):
                # what stops one count stops the larger ones (a link, the memory): said for all of them
                counted = f"{count} x "
                if count < max_instances and result.startswith(counted):
                    result = f"{count}-{max_instances} x {result.removeprefix(counted)}"
                fixes = catalog_fixes(result, name)  # as recommend says them
                result += f" ({'; or '.join(fixes)})" if fixes else ""
                if result not in refused:
                    refused.append(result)
                break
            rows.append(_row(result, gpus, batch_size))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if len(frame):
        order = "samples_per_s" if frame["samples_per_s"].notna().all() else "iteration_s"
        frame = frame.sort_values(order, ascending=order == "iteration_s").reset_index(drop=True)
    return frame, refused


def _row(result: ConfigPrediction, gpus: int, batch_size: int | None) -> dict[str, Any]:
    workers, count = result.workers_per_instance, result.instance_count
    label = f"{count} x {result.instance}"
    samples = batch_size * workers * count / result.iteration_s if batch_size else None
    return {
        "config": label,
        "instance": result.instance,
        "accelerator": result.accelerator,
        "instance_count": count,
        "gpus_per_instance": gpus,
        "workers_per_instance": workers,
        "workers": workers * count,
        "path": result.path,
        "source": "measured" if getattr(result, "measured", False) else "predicted",
        "compute_s": result.compute_s,
        "interconnect_s": result.interconnect_s,
        "network_s": result.network_s,
        "iteration_s": result.iteration_s,
        "iteration_ci95_s": getattr(result, "iteration_ci95_s", None),
        "samples_per_s": samples,
        "expected_error": result.expected_error,
        "unvalidated": not getattr(result, "validated", True),
        "comm_error": getattr(result, "comm_error", None),
        "memory_needed_gb": result.memory_needed_gb,
        "memory_gb": result.memory_gb,
        "basis": result.basis,
        "note": "; ".join(result.notes),
    }
