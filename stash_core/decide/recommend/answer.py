"""The answer to "what should I rent": check the request, evaluate every option, rank, explain."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.catalog import stale_catalog_warning, stored_label_checks
from stash_core.catalog.unknown_names import unknown_names_note
from stash_core.cells import plain_row
from stash_core.decide.predict.configuration import HALF_WEIGHTS, profile_shape
from stash_core.decide.predict.cpu_rows import off_their_gpus
from stash_core.decide.predict.instances import all_catalog_rows, check_precision, note_list
from stash_core.decide.predict.profile_arithmetic import (
    DEFAULT_PRECISION,
    cudnn_share,
    job_precision,
    machine_name,
    other_input_line,
    profile_accelerator,
    profile_precisions,
    ran_as,
)
from stash_core.decide.predict.profile_checks import mislabelled_line, other_code
from stash_core.decide.predict.refusals import refusal_json
from stash_core.decide.predict.step_cost import calls_attention
from stash_core.decide.recommend.candidates import OptionPlanner
from stash_core.decide.recommend.costs import STALL_NAMES, RentalJob, communication_unmeasured
from stash_core.decide.recommend.explain import explanations, infeasible_reason, stale_prices
from stash_core.decide.recommend.job_model import (
    built_in_16_bits,
    check_model,
    counted_step,
    job_shapes,
    model_kind,
)
from stash_core.decide.recommend.pareto import rank_options
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob, layout_kind, optimizer_name
from stash_core.store.reads import measured_profiles
from stash_core.units import finite_float
from stash_core.zoo_names import canonical_model

DEFAULT_MAX_INSTANCES = 4
# An instance evaluated without a price of the kind asked: the phrase its line has, which the Recommend page
# counts by (views/recommend.py)
UNPRICED = "have no cost and are not ranked"


@dataclass
class Recommendation:
    """The answer: every option evaluated, the feasible ones ranked, the Pareto front, and the reasons."""

    request: dict[str, Any]
    options: pd.DataFrame
    best: dict[str, Any] | None
    explanations: list[str] = field(default_factory=list)
    infeasible_reason: str | None = None
    excluded: list[str] = field(default_factory=list)
    label_warnings: list[str] = field(default_factory=list)
    profiles_set_aside: list[str] = field(default_factory=list)  # the job's stored profiles not used, and why
    price_warning: str = ""  # prices older than PRICE_AGE_DAYS or undated, where the answer rests on any
    catalog_warning: str = ""  # catalog rows an older Stash seeded, among those evaluated (see catalog.py)

    @property
    def warnings(self) -> list[str]:
        """What the user should know before renting: profiles whose machine does not fit their label, old or
        undated prices, catalog rows as an older Stash shipped them."""
        said = (self.price_warning, self.catalog_warning)
        return [*self.label_warnings, *(warning for warning in said if warning)]

    @property
    def ranked(self) -> pd.DataFrame:
        """Configurations meeting every constraint, cheapest first."""
        frame = self.options[self.options["feasible"]]
        return frame.sort_values(["rank"]).reset_index(drop=True)

    @property
    def pareto(self) -> pd.DataFrame:
        """Options no other option beats on both training time and cost, fastest first."""
        return self.options[self.options["pareto"]].sort_values("training_h").reset_index(drop=True)

    def to_json(self) -> dict[str, Any]:
        """{"job", "recommended", "options" (feasible, cheapest first), "predictions" (every configuration
        evaluated), "not_predicted" (instances), "profiles_set_aside" (the job's stored profiles not used,
        each with why), "explanations", "infeasible_reason", "warnings"}: plain JSON values, None for a figure
        that is not known (a CPU or disk stall not predicted, a missing price)."""
        return {
            "job": dict(self.request),
            "recommended": None if self.best is None else _json_option(plain_row(self.best)),
            "options": [_json_option(plain_row(row)) for row in self.ranked.to_dict(orient="records")],
            "predictions": [_json_option(plain_row(row)) for row in self.options.to_dict(orient="records")],
            "not_predicted": [refusal_json(line) for line in self.excluded],
            "profiles_set_aside": list(self.profiles_set_aside),
            "explanations": list(self.explanations),
            "infeasible_reason": self.infeasible_reason,
            "warnings": self.warnings,
        }


def _json_option(row: dict[str, Any]) -> dict[str, Any]:
    option = {
        "rank": row.get("rank"),
        "config": row["config"],
        "instance": row["instance"],
        "accelerator": row.get("accelerator"),
        "instance_count": row["instance_count"],
        "gpus": row.get("gpus_per_instance"),
        "workers_per_instance": row["workers_per_instance"],
        "workers": row["workers_total"],
        "source": row["source"],
        "path": row.get("path"),
        "run_id": row.get("run_id"),
        "step_s": row["iteration_s"],
        "step_ci95_s": row.get("iteration_ci95_s"),  # a measured option's: its profile's 95% half-width
        "samples_per_s": row.get("samples_per_s"),
        "expected_error": row["expected_error"],
        "unvalidated": bool(row.get("unvalidated")),
        "comm_expected_error": row.get("comm_error"),
        "memory_gb": row.get("memory_gb"),
        "memory_needed_gb": row.get("memory_needed_gb"),
        **{f"{stall}_s": row[f"{stall}_s"] for stall in STALL_NAMES},
        "iterations_per_epoch": row.get("iterations_per_epoch"),
        "epoch_s": row["epoch_s"],
        "training_h": row["training_h"],
        "usd_per_h": row["usd_per_h"],
        "price_date": None if row.get("price_date") is None else str(row["price_date"]),
        "price_region": row.get("price_region"),
        "price_source": row.get("price_source"),
        "training_usd": row["training_usd"],
        "meets_time": bool(row.get("meets_time")),
        "meets_cost": bool(row.get("meets_cost")),
        "feasible": bool(row.get("feasible")),
        "pareto": bool(row.get("pareto")),
        "basis": row["basis"],
        "notes": note_list(row.get("note")),
    }
    return option


def recommend(
    db_path: Path | str,
    model: str,
    batch_size: int,
    epochs: float,
    dataset_images: int,
    budget_hours: float | None = None,
    max_usd: float | None = None,
    spot: bool = False,
    instances: list[str] | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    precision: str = "fp32",
    input_shape: tuple[int, ...] | None = None,
    habits: TrainingJob | None = None,
    workers_per_instance: int | None = None,
) -> Recommendation:
    """Rank configurations for training `model` (per-worker `batch_size`, one sample of `input_shape`, in
    `precision`, with `habits`: memory format, optimizer, attention) for `epochs` of `dataset_images`
    samples, on `workers_per_instance` GPUs of each instance (None: all of them)."""
    _check_request(batch_size, epochs, dataset_images, budget_hours, max_usd, max_instances)
    workers = workers_per_instance
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0):
        raise UsageError(f"workers per instance must be a positive whole number, got {workers!r}")
    check_precision(precision)
    check_model(db_path, model)
    model = canonical_model(model)  # `ResNet18` finds the profiles of resnet18
    shape, default_shape = job_shapes(model, input_shape)
    habits = habits or TrainingJob()
    kind = model_kind(model, habits, input_shape)
    attends = calls_attention(model, kind, batch_size, shape)  # a file's step: counted once, kept in-process
    # one line for a habit the model cannot have
    habits.check(layout_kind(kind, shape), optimizer_name(kind), attends)
    pricing = "spot" if spot else "on_demand"
    default_arithmetic = precision == DEFAULT_PRECISION  # PyTorch's, as predict restates it
    counted = counted_step(model, batch_size, shape if input_shape else None) if default_arithmetic else None
    precision, why = job_precision(precision, counted)
    request = {
        "model": model,
        "batch_size": batch_size,
        "input_shape": None if shape is None else list(shape),
        "precision": precision,
        "precision_why": why,
        "workers_per_instance": workers_per_instance or "all GPUs",  # one worker per GPU, as predict's job
        "epochs": epochs,
        "dataset_images": dataset_images,
        "budget_hours": budget_hours,
        "max_usd": max_usd,
        "pricing": pricing,
        "max_instances": max_instances,
        **habits.to_json(layout_kind(kind, shape), optimizer_name(kind), attends),
        "habits": habits.describe(layout_kind(kind, shape), optimizer_name(kind), attends),
    }
    everything = all_catalog_rows(db_path)  # read once: the selection, the labels, the profiles' GPUs
    catalog = _catalog(everything, instances)
    measured, label_warnings, set_aside = _labelled_profiles(db_path, model, batch_size, everything)
    measured, on_cpus = off_their_gpus(measured, everything)
    set_aside += on_cpus
    ran = _profile_precisions(model, batch_size, shape if input_shape else None, everything)
    if default_arithmetic:  # every profile ran PyTorch's defaults (Stash's workers leave them): each holds
        ran = lambda row: (precision,)  # noqa: E731
    if built_in_16_bits(model, batch_size, shape if input_shape else None):
        # it trains in its own precision whatever is asked, and so did each of its profiles (as predict says)
        request["precision"] = HALF_WEIGHTS
        ran = lambda row: (precision,)  # noqa: E731
    measured, other_jobs = _same_job(
        measured, shape, default_shape, precision, habits.is_default(optimizer_name(kind)), ran
    )
    set_aside += other_jobs
    unmeasured = [communication_unmeasured(row) for row in measured.to_dict(orient="records")]
    measured = measured.assign(_unmeasured=unmeasured).sort_values("_unmeasured", kind="stable")
    measured = measured.drop(columns="_unmeasured").reset_index(drop=True)
    measured = measured.drop_duplicates(["instance", "workers_per_node", "nodes"], keep="first")
    given = shape if input_shape else None  # the model's default needs no flag in the hints
    asked = DEFAULT_PRECISION if default_arithmetic else precision  # the predictor resolves it as above
    job = RentalJob(model, batch_size, float(epochs), dataset_images, pricing, asked, given, habits)
    planner = OptionPlanner(db_path, job, catalog, measured, set_aside=len(set_aside))
    for name, instance in catalog.items():
        planner.add_instance_options(name, instance, max_instances, workers_per_instance)
    if not instances:
        # Profiles whose instance label is not a catalog name cannot be priced: say so rather than drop them.
        unknown = sorted({str(label) for label in measured["instance"].dropna()} - set(catalog))
        planner.excluded.extend(  # one entry per instance: JSON's not_predicted names instances
            f"{label}: profiled, but not in the instance catalog, so no price (add it with "
            f"`stash instances add {shlex.quote(label)} --on-demand-usd-per-h ...`)"
            for label in unknown
        )
    planner.excluded.extend(_unpriced(planner.options, catalog, pricing))
    options = rank_options(planner.options, budget_hours, max_usd)
    ranked = options[options["feasible"]].sort_values("rank")
    best = plain_row(ranked.iloc[0].to_dict()) if len(ranked) else None  # NaN of a stall not known: None
    result = Recommendation(request, options, best, excluded=planner.excluded, label_warnings=label_warnings)
    result.profiles_set_aside = set_aside
    result.price_warning = stale_prices(options, request)
    result.catalog_warning = stale_catalog_warning(db_path, catalog)
    if best is None:
        result.infeasible_reason = infeasible_reason(options, request, planner.excluded)
    else:
        result.explanations = explanations(options, best, request)
    return result


def _unpriced(options: list[dict[str, Any]], catalog: dict[str, dict[str, Any]], pricing: str) -> list[str]:
    """A line for each instance whose configurations were evaluated but cannot be ranked: it has no price of
    the kind asked (a spot price, most often), so no cost."""
    counts: dict[str, int] = {}
    for option in options:
        if option["usd_per_h"] is None:
            counts[option["instance"]] = counts.get(option["instance"], 0) + 1
    kind = "spot price" if pricing == "spot" else "on-demand price"
    return [
        f"{name}: no {kind} in the catalog (set one with `stash instances set`), so its {count} "
        f"configuration(s) {UNPRICED} (listed with --all)"
        for name, count in counts.items()
        if name in catalog
    ]


def _labelled_profiles(
    db_path: Path | str, model: str, batch_size: int, everything: dict[str, dict[str, Any]]
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The measured profiles that may stand for their instance, the warnings of every profile whose machine
    does not fit its label (confirmed or not), and a line per profile set aside for that reason.

    Labels are checked against the whole catalog (a profile counts for its instance whatever the request
    considers); a contradicted label counts only once the user confirms it (catalog/labels.py).
    """
    measured = measured_profiles(db_path, model, batch_size)
    if measured.empty:
        return measured, [], []
    changed = other_code(model, measured.to_dict(orient="records"))  # a model file edited since
    checks = stored_label_checks(db_path, list(measured["run_id"]), everything)
    warnings = [check.warning for check in checks.values() if check.warning]
    mislabelled = {run_id for run_id, check in checks.items() if not check.usable} - set(changed)
    set_aside = [*changed.values(), *(mislabelled_line(run_id, check) for run_id, check in checks.items()
                                      if run_id in mislabelled)]  # fmt: skip
    unusable = mislabelled | set(changed)
    return measured[~measured["run_id"].isin(unusable)].reset_index(drop=True), warnings, set_aside


def _profile_precisions(
    model: str, batch_size: int, shape: tuple[int, ...] | None, everything: dict[str, dict[str, Any]]
) -> Callable[[dict[str, Any]], tuple[str, ...]]:
    """The precisions a stored profile row of this job stands for (profile_arithmetic.py); the step is
    counted only when a profile on a GPU with TF32 asks for its convolutions' share."""
    share: list[float | None] = []

    def precisions(row: dict[str, Any]) -> tuple[str, ...]:
        accelerator = profile_accelerator(row, everything)
        if accelerator is not None and accelerator.tf32_tflops and not share:
            from stash_core.decide.predict.step_cost import step_cost

            try:
                share.append(cudnn_share(step_cost(model, batch_size, shape)))
            except UsageError:  # a model known only by its profiles: its arithmetic unknown
                share.append(None)
        return profile_precisions(accelerator, share[0] if share else None)

    return precisions


def _same_job(
    measured: pd.DataFrame,
    shape: tuple[int, ...] | None,
    default_shape: tuple[int, ...] | None,
    precision: str,
    default_habits: bool = True,
    ran: Callable[[dict[str, Any]], tuple[str, ...]] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The profiles that measured this job (its input shape; its precision, `ran` giving those a profile row
    stands for, fp32 alone where not given; profiles run with the zoo's habits), and a line for each set aside
    because it measured another one."""
    if measured.empty:
        return measured, []
    if not default_habits:  # what passes precision and input shape may still anchor a scaled prediction
        same, lines = _same_job(measured, shape, default_shape, precision, True, ran)
        lines += [
            f"profile {run_id} on {machine_name(instance)}: not taken as this job's measurement, it ran the "
            "zoo's training habits and the job has others (predictions may still scale from it by the step "
            "model's ratio of the two)"
            for run_id, instance in zip(same["run_id"], same["instance"], strict=True)
        ]
        return measured.iloc[0:0], lines
    ran_in = [ran(row) if ran else ("fp32",) for row in measured.to_dict(orient="records")]
    same_arithmetic = pd.Series([precision in found for found in ran_in], index=measured.index)
    if not same_arithmetic.all():
        lines = [
            f"profile {run_id} on {machine_name(instance)}: set aside, it ran in {ran_as(found)} and the job "
            f"trains in {precision}"
            for run_id, instance, found in zip(measured["run_id"], measured["instance"], ran_in, strict=True)
            if precision not in found
        ]
        kept, more = _same_job(
            measured[same_arithmetic].reset_index(drop=True),
            shape, default_shape, precision, default_habits, ran,
        )  # fmt: skip
        return kept, lines + more
    if shape is None or "input_shape" not in measured:
        return measured, []
    # A profile that names no input shape ran with the model's default one.
    shapes = [profile_shape(row) or default_shape or shape for row in measured.to_dict(orient="records")]
    keep = pd.Series([tuple(found) == tuple(shape) for found in shapes], index=measured.index)
    lines = [
        other_input_line(row, found, shape)
        for row, found, kept in zip(measured.to_dict(orient="records"), shapes, keep, strict=True)
        if not kept
    ]
    return measured[keep].reset_index(drop=True), lines


def _catalog(everything: dict[str, dict[str, Any]], instances: list[str] | None) -> dict[str, dict[str, Any]]:
    """The catalog rows to consider, by name: all, or the named ones (UsageError for an unknown name)."""
    if not instances:
        return dict(everything)
    unknown = sorted(set(instances) - set(everything))
    if unknown:
        raise UsageError(
            f"unknown instance(s) {', '.join(unknown)}{unknown_names_note(unknown, everything)}: see "
            "`stash instances list`"
        )
    return {name: row for name, row in everything.items() if name in instances}


def _check_request(batch_size, epochs, dataset_images, budget_hours, max_usd, max_instances) -> None:
    counts = (batch_size, "batch size"), (dataset_images, "dataset images"), (max_instances, "max instances")
    for value, what in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{what} must be a positive whole number, got {value!r}")
    if dataset_images < batch_size:  # no step of the batch asked for: a smaller one is another job
        raise UsageError(f"an epoch of {dataset_images:,} samples holds no full batch of {batch_size}")
    for value, what in ((epochs, "epochs"), (budget_hours, "budget hours"), (max_usd, "max USD")):
        number = finite_float(value) if isinstance(value, (int, float)) else None
        if value is not None and (number is None or number <= 0):
            raise UsageError(f"{what} must be a positive number, got {value!r}")
    if budget_hours is None and max_usd is None:
        raise UsageError("give budget_hours (a time budget), max_usd (a cost limit) or both")
