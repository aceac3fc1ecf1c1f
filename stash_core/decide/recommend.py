"""Which instances to rent, how many, for a training job under a time budget (and optionally a cost cap).

Every configuration (catalog instance x instance count x workers per instance) gets an iteration time:
  - measured: a completed profile of the same model and batch size on that instance, worker and node count;
  - predicted: compute, CPU and disk stall from a profile of the model on the same instance (or another one
    with the same accelerator), plus interconnect and network stall predicted by the validated stall models
    (stash_core.decide.fit) from the model's counts; marked "predicted" with the expected error.
Epoch = (images // workers) // batch iterations (stash_core.analysis.epochs, as the profiled loop counts it);
training = epochs x epoch; cost = training hours x hourly price x instances. Configurations that meet
the budget are ranked by cost; the time-cost Pareto front is marked; cheaper-looking alternatives get a
sentence on why they lose; an empty answer names the constraint that cannot be met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.analysis.epochs import iterations_per_epoch
from stash_core.decide.catalog import list_instances
from stash_core.decide.cost import hourly_price
from stash_core.decide.fit import predict_stall
from stash_core.errors import UsageError
from stash_core.store import query_readonly

STALL_NAMES = ("compute", "interconnect", "network", "cpu", "disk")
DEFAULT_MAX_INSTANCES = 4
OPTION_COLUMNS = (
    "config",
    "instance",
    "instance_count",
    "workers_per_instance",
    "workers_total",
    "source",
    "run_id",
    "basis",
    "iteration_s",
    "iterations_per_epoch",
    "epoch_s",
    "training_h",
    "usd_per_h",
    "training_usd",
    "expected_error",
    *(f"{stall}_s" for stall in STALL_NAMES),
    "meets_time",
    "meets_cost",
    "feasible",
    "pareto",
    "rank",
    "note",
)

_MEASURED_SQL = """
SELECT run_id, CAST(started_at AS TIMESTAMP) AS started_at, instance, workers_per_node, nodes, device,
       iteration_s, compute_s, interconnect_s, network_s, cpu_s, disk_s,
       compute_status, interconnect_status, network_status, cpu_status, disk_status
FROM stall_breakdown
WHERE status = 'completed' AND model = ? AND batch_size = ? AND iteration_s IS NOT NULL
ORDER BY started_at DESC, run_id DESC
"""


@dataclass
class Recommendation:
    """The answer: every option evaluated, the feasible ones ranked, the Pareto front, and the reasons."""

    request: dict[str, Any]
    options: pd.DataFrame
    best: dict[str, Any] | None
    explanations: list[str] = field(default_factory=list)
    infeasible_reason: str | None = None
    excluded: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> pd.DataFrame:
        """Configurations meeting every constraint, cheapest first."""
        frame = self.options[self.options["feasible"]]
        return frame.sort_values(["rank"]).reset_index(drop=True)

    @property
    def pareto(self) -> pd.DataFrame:
        """Options no other option beats on both training time and cost, fastest first."""
        return self.options[self.options["pareto"]].sort_values("training_h").reset_index(drop=True)


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
) -> Recommendation:
    """Rank configurations for training `model` (per-worker `batch_size`) for `epochs` of `dataset_images`."""

    _check_request(batch_size, epochs, dataset_images, budget_hours, max_usd, max_instances)
    pricing = "spot" if spot else "on_demand"
    request = {
        "model": model,
        "batch_size": batch_size,
        "epochs": epochs,
        "dataset_images": dataset_images,
        "budget_hours": budget_hours,
        "max_usd": max_usd,
        "pricing": pricing,
        "max_instances": max_instances,
    }
    catalog = list_instances(db_path)
    if instances:
        unknown = sorted(set(instances) - set(catalog["name"]))
        if unknown:
            raise UsageError(f"unknown instance(s) {', '.join(unknown)}: see `stash instances list`")
        catalog = catalog[catalog["name"].isin(instances)]
    by_name = {row["name"]: _plain_row(row) for row in catalog.to_dict(orient="records")}
    measured = query_readonly(db_path, _MEASURED_SQL, [model, batch_size])
    measured = measured.drop_duplicates(["instance", "workers_per_node", "nodes"], keep="first")
    planner = _Planner(db_path, model, batch_size, epochs, dataset_images, pricing, by_name, measured)
    for name, instance in by_name.items():
        planner.add_instance_options(name, instance, max_instances)
    if not instances:
        # Profiles whose instance label is not a catalog name cannot be priced: say so rather than drop them.
        unknown = sorted({str(label) for label in measured["instance"].dropna()} - set(by_name))
        if unknown:
            planner.excluded.append(
                f"profiles on {', '.join(unknown)}: not in the instance catalog, so no price "
                "(add them with `stash instances add NAME --on-demand-usd-per-h ...`)"
            )
    options = _finish(planner.options, budget_hours, max_usd)
    best = None
    ranked = options[options["feasible"]].sort_values("rank")
    if len(ranked):
        best = ranked.iloc[0].to_dict()
    result = Recommendation(request, options, best, excluded=planner.excluded)
    if best is None:
        result.infeasible_reason = _infeasible_reason(options, request, planner.excluded)
    else:
        result.explanations = _explanations(options, best, request)
    return result


def _check_request(batch_size, epochs, dataset_images, budget_hours, max_usd, max_instances) -> None:
    for value, what in (
        (batch_size, "batch size"),
        (dataset_images, "dataset images"),
        (max_instances, "max instances"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{what} must be a positive whole number, got {value!r}")
    for value, what in ((epochs, "epochs"), (budget_hours, "budget hours"), (max_usd, "max USD")):
        if value is not None and (
            not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
        ):
            raise UsageError(f"{what} must be a positive number, got {value!r}")
    if budget_hours is None and max_usd is None:
        raise UsageError("give a time budget (hours), a cost limit (USD) or both")


class _Planner:
    """Builds one option row per configuration; remembers why configurations could not be evaluated."""

    def __init__(
        self, db_path, model, batch_size, epochs, dataset_images, pricing, catalog, measured
    ) -> None:
        self.db_path = db_path
        self.model = model
        self.batch_size = batch_size
        self.epochs = float(epochs)
        self.dataset_images = dataset_images
        self.pricing = pricing
        self.catalog = catalog
        self.measured = measured
        self.options: list[dict[str, Any]] = []
        self.excluded: list[str] = []
        self._report = None
        self._counts: dict[str, Any] | None = None

    def add_instance_options(self, name: str, instance: dict[str, Any], max_instances: int) -> None:
        price, price_status = hourly_price(instance, name, self.pricing)
        runs = self.measured[self.measured["instance"] == name]
        seen = set()
        for row in runs.to_dict(orient="records"):
            key = (int(row["workers_per_node"]), int(row["nodes"]))
            seen.add(key)
            self._add_measured(name, instance, row, price, price_status)
        accelerators = instance.get("accelerator_count") or 0
        if accelerators > 0:
            worker_counts = [accelerators]
        else:  # a CPU machine: workers are processes, so only counts that were profiled make sense
            worker_counts = sorted({int(workers) for workers in runs["workers_per_node"]})
        if not worker_counts:
            return
        for workers in worker_counts:
            for count in range(1, max_instances + 1):
                if (workers, count) not in seen:
                    self._add_predicted(name, instance, workers, count, price, price_status)

    def _add_measured(self, name, instance, row, price, price_status) -> None:
        stalls = {stall: _number(row.get(f"{stall}_s")) for stall in STALL_NAMES}
        notes = []
        if row.get("cpu_status") in (None, "not_measured") and row.get("disk_status") in (
            None,
            "not_measured",
        ):
            notes.append("data stalls not profiled (synthetic data only)")
        self._append(
            name,
            instance,
            int(row["nodes"]),
            int(row["workers_per_node"]),
            "measured",
            row["run_id"],
            f"profile {row['run_id']}",
            float(row["iteration_s"]),
            stalls,
            None,
            price,
            price_status,
            notes,
        )

    def _add_predicted(self, name, instance, workers, count, price, price_status) -> None:
        base = self._base_run(name, instance, workers)
        if base is None:
            accelerator = instance.get("accelerator") or "same"
            reason = (
                f"{name}: no profile of {self.model} at batch {self.batch_size} on it or another "
                f"{accelerator} instance (run `stash profile --model {self.model} "
                f"--batch-size {self.batch_size} --instance {name}` there)"
            )
            if reason not in self.excluded:
                self.excluded.append(reason)
            return

        stalls = {"compute": _number(base.get("compute_s"))}
        if stalls["compute"] is None:
            self._exclude(f"{name}: profile {base['run_id']} has no compute time")
            return
        notes = []
        for stall in ("cpu", "disk"):
            stalls[stall] = _number(base.get(f"{stall}_s")) or 0.0
        if base.get("cpu_status") in (None, "not_measured") and base.get("disk_status") in (
            None,
            "not_measured",
        ):
            notes.append("data stalls not profiled (assumed 0)")
        weighted_error = 0.0
        error_known = True
        modelled = False
        same_machine = base["instance"] == name and int(base["workers_per_node"]) == workers
        basis = [f"compute from {base['run_id']} on {base['instance']}"]
        for stall in ("interconnect", "network"):
            if stall == "interconnect" and (workers == 1 or same_machine):
                stalls[stall] = 0.0 if workers == 1 else (_number(base.get("interconnect_s")) or 0.0)
                continue
            if stall == "network" and count == 1:
                stalls[stall] = 0.0
                continue
            prediction = predict_stall(
                counts=self._model_counts(),
                stall=stall,
                workers_per_node=workers,
                nodes=count,
                device=base.get("device"),
                instance=name,
                bandwidth_gbps=instance.get("network_gbps"),
                report=self._fit_report(),
            )
            if prediction["stall_s"] is None:
                self._exclude(f"{count} x {name}: {stall} stall cannot be predicted - {prediction['status']}")
                return
            stalls[stall] = prediction["stall_s"]
            modelled = True
            basis.append(f"{stall} by {prediction['method']}")
            if prediction["expected_mape"] is None:
                error_known = False
                notes.append(f"{stall} stall {prediction['status']}")
            else:
                weighted_error += prediction["expected_mape"] * prediction["stall_s"]
        iteration_s = sum(stalls.values())
        # The expected error covers the modelled stalls; compute/CPU/disk come from a measured profile.
        expected = weighted_error / iteration_s if modelled and error_known and iteration_s > 0 else None
        self._append(
            name,
            instance,
            count,
            workers,
            "predicted",
            None,
            "; ".join(basis),
            iteration_s,
            stalls,
            expected,
            price,
            price_status,
            notes,
        )

    def _append(
        self,
        name,
        instance,
        count,
        workers,
        source,
        run_id,
        basis,
        iteration_s,
        stalls,
        expected,
        price,
        price_status,
        notes,
    ) -> None:
        per_epoch = iterations_per_epoch(self.dataset_images, self.batch_size, workers * count)
        epoch_s = per_epoch * iteration_s
        training_h = epoch_s * self.epochs / 3600.0
        usd_per_h = None if price is None else price * count
        if price is None:
            notes = [*notes, price_status]
        accelerators = instance.get("accelerator_count") or 0
        label = f"{count} x {name}"
        if accelerators and workers != accelerators:
            label += f" ({workers} of {accelerators} GPUs each)"
        elif not accelerators:
            label += f" ({workers} workers each)"
        self.options.append(
            {
                "config": label,
                "instance": name,
                "instance_count": count,
                "workers_per_instance": workers,
                "workers_total": workers * count,
                "source": source,
                "run_id": run_id,
                "basis": basis,
                "iteration_s": iteration_s,
                "iterations_per_epoch": per_epoch,
                "epoch_s": epoch_s,
                "training_h": training_h,
                "usd_per_h": usd_per_h,
                "training_usd": None if usd_per_h is None else training_h * usd_per_h,
                "expected_error": expected,
                **{f"{stall}_s": stalls.get(stall) for stall in STALL_NAMES},
                "note": "; ".join(notes),
            }
        )

    def _exclude(self, reason: str) -> None:
        if reason not in self.excluded:
            self.excluded.append(reason)

    def _base_run(self, name: str, instance: dict[str, Any], workers: int) -> dict[str, Any] | None:
        """The profile for compute/CPU/disk (and interconnect when its workers match).

        This instance with the same workers per node (one node preferred, but the R0/R1 of a multi-node
        profile measure the same thing), then this instance with any workers, then an instance with the
        same accelerator.
        """
        ordered = self.measured.assign(_multi=self.measured["nodes"] > 1).sort_values("_multi", kind="stable")
        here = ordered[ordered["instance"] == name]
        same = here[here["workers_per_node"] == workers]
        if len(same):
            return same.iloc[0].to_dict()
        if len(here):
            return here.iloc[0].to_dict()
        accelerator = instance.get("accelerator")
        if not accelerator:
            return None
        twins = [other for other, row in self.catalog.items() if row.get("accelerator") == accelerator]
        there = ordered[ordered["instance"].isin(twins)]
        return there.iloc[0].to_dict() if len(there) else None

    def _fit_report(self):
        if self._report is None:
            from stash_core.decide.fit import fit_stall_models

            self._report = fit_stall_models(self.db_path)
        return self._report

    def _model_counts(self) -> dict[str, Any]:
        if self._counts is None:
            from stash_core.store import query_readonly

            found = query_readonly(
                self.db_path,
                "SELECT grad_bytes, grad_tensor_count, layer_count FROM models WHERE name = ?",
                [self.model],
            )
            if len(found) and not found.iloc[0].isna().any():
                self._counts = {key: float(value) for key, value in found.iloc[0].to_dict().items()}
            else:
                from stash_core.decide.fit import model_counts

                self._counts = model_counts(self.model)
        return self._counts


def _finish(rows: list[dict[str, Any]], budget_hours: float | None, max_usd: float | None) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[column for column in OPTION_COLUMNS])
    if frame.empty:
        for column in ("meets_time", "meets_cost", "feasible", "pareto"):
            frame[column] = frame[column].astype(bool)
        return frame
    frame["meets_time"] = True if budget_hours is None else frame["training_h"] <= budget_hours
    has_cost = frame["training_usd"].notna()
    frame["meets_cost"] = has_cost & (True if max_usd is None else frame["training_usd"] <= max_usd)
    frame["feasible"] = frame["meets_time"] & frame["meets_cost"]
    frame["pareto"] = _pareto_mask(frame)
    order = frame[frame["feasible"]].sort_values(["training_usd", "training_h", "config"]).index
    frame["rank"] = pd.array([None] * len(frame), dtype="Int64")
    frame.loc[order, "rank"] = range(1, len(order) + 1)
    return frame.sort_values(
        ["feasible", "training_usd", "training_h"], ascending=[False, True, True], na_position="last"
    ).reset_index(drop=True)


def _pareto_mask(frame: pd.DataFrame) -> pd.Series:
    known = frame["training_usd"].notna() & frame["training_h"].notna()
    mask = pd.Series(False, index=frame.index)
    points = frame.loc[known, ["training_h", "training_usd"]]
    for index, (hours, usd) in points.iterrows():
        dominated = (
            (points["training_h"] <= hours)
            & (points["training_usd"] <= usd)
            & ((points["training_h"] < hours) | (points["training_usd"] < usd))
        ).any()
        mask[index] = not dominated
    return mask


def _short(option: dict[str, Any]) -> str:
    return f"{option['instance_count']} x {option['instance']}"


def slowdown_cause(slower: dict[str, Any], faster: dict[str, Any]) -> str:
    """Which stall makes `slower` slower than `faster`, per epoch (so worker counts may differ)."""
    slowdown = slower["epoch_s"] / faster["epoch_s"] - 1.0
    if slowdown <= 0:
        return f"{_short(slower)} is not slower than {_short(faster)}"
    extra = {}
    for stall in STALL_NAMES:
        mine = _number(slower.get(f"{stall}_s")) or 0.0
        theirs = _number(faster.get(f"{stall}_s")) or 0.0
        extra[stall] = mine * slower["iterations_per_epoch"] - theirs * faster["iterations_per_epoch"]
    cause = max(extra, key=extra.get)
    what = "compute (fewer or slower accelerators)" if cause == "compute" else f"{cause} stall"
    return f"{what} makes {_short(slower)} {slowdown:.0%} slower than {_short(faster)}"


def _explanations(options: pd.DataFrame, best: dict[str, Any], request: dict[str, Any]) -> list[str]:
    lines = [
        f"{best['config']} ({best['source']}) is the cheapest configuration that meets the constraints: "
        f"{best['training_h']:.1f} h and ${best['training_usd']:,.2f} for {request['epochs']:g} epochs"
    ]
    alternatives = options[
        options["usd_per_h"].notna()
        & (options["config"] != best["config"])
        & (
            (options["usd_per_h"] < best["usd_per_h"])
            | (
                (options["workers_total"] == best["workers_total"])
                & (options["usd_per_h"] <= best["usd_per_h"])
            )
        )
    ]
    # Same accelerator count for no more money is the most tempting alternative: explain those first.
    alternatives = alternatives.assign(_same=alternatives["workers_total"] != best["workers_total"])
    alternatives = alternatives.sort_values(["_same", "usd_per_h", "training_h"])
    for option in alternatives.head(5).to_dict(orient="records"):
        cheaper = (
            f"costs ${option['usd_per_h']:.2f}/h against ${best['usd_per_h']:.2f}/h"
            if option["usd_per_h"] < best["usd_per_h"]
            else f"has the same {option['workers_total']} accelerators for ${option['usd_per_h']:.2f}/h"
        )
        cause = slowdown_cause(option, best) if option["epoch_s"] > best["epoch_s"] else ""
        if not option["meets_time"]:
            line = (
                f"{option['config']} {cheaper} but needs {option['training_h']:.1f} h, over the "
                f"{request['budget_hours']:g} h budget"
            )
        elif option["training_usd"] is not None and option["training_usd"] > best["training_usd"]:
            line = (
                f"{option['config']} {cheaper} but the training costs ${option['training_usd']:,.2f} "
                f"against ${best['training_usd']:,.2f}"
            )
        else:
            line = f"{option['config']} {cheaper} but is over the ${request['max_usd']:,.2f} limit"
        if cause:
            line += f": {cause}"
        if option["source"] == "predicted":
            line += " (predicted" + (
                f", expected error {_number(option['expected_error']):.0%})"
                if _number(option["expected_error"]) is not None
                else ")"
            )
        lines.append(line)
    return lines


def _infeasible_reason(options: pd.DataFrame, request: dict[str, Any], excluded: list[str]) -> str:
    work = f"{request['epochs']:g} epochs of {request['dataset_images']:,} images"
    if options.empty:
        detail = "; ".join(excluded[:3]) if excluded else "the catalog has no instances to consider"
        more = f" (and {len(excluded) - 3} more)" if len(excluded) > 3 else ""
        what = f"{request['model']} at batch {request['batch_size']}"
        return f"no configuration could be evaluated for {what}: {detail}{more}"
    priced = options[options["training_usd"].notna()]
    if priced.empty:
        pricing = "spot" if request["pricing"] == "spot" else "on-demand"
        return (
            f"none of the evaluated instances has a {pricing} price in the catalog "
            "(set one with `stash instances set`)"
        )
    budget = request["budget_hours"]
    if budget is not None and not priced["meets_time"].any():
        fastest = priced.sort_values("training_h").iloc[0]
        return (
            f"no configuration finishes {work} within {budget:g} h: the fastest, {fastest['config']} "
            f"({fastest['source']}), needs {fastest['training_h']:.1f} h; raise --budget-hours or allow "
            f"more instances (--max-instances)"
        )
    in_time = priced[priced["meets_time"]]
    cheapest = in_time.sort_values("training_usd").iloc[0]
    scope = f"{len(in_time)} configuration(s) finish within {budget:g} h, but" if budget is not None else ""
    return (
        f"{scope} the cheapest{' of them' if scope else ''}, {cheapest['config']}, costs "
        f"${cheapest['training_usd']:,.2f}, over the ${request['max_usd']:,.2f} limit"
    ).strip()


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _plain_row(row: dict[str, Any]) -> dict[str, Any]:
    clean = {}
    for key, value in row.items():
        if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            value = None
        elif hasattr(value, "item"):
            value = value.item()
        clean[key] = value
    return clean
