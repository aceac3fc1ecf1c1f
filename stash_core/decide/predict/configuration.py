"""The predicted iteration time of one configuration (instance type x instances x workers per instance).

Compute comes by one of three paths, the best available first:
  - "measured": a profile of the model at this batch on this instance type (its compute stall);
  - "scaled": a profile of the model at this batch on another GPU instance: its measured compute stall
    (which carries the model's own efficiency) times the ratio of the two GPUs' roofline times;
  - "roofline": the calibrated per-operator roofline alone.
Interconnect and network come from network.py. The expected error is that of the compute path, measured
by leave-one-GPU-out over the published figures (validation.py); communication is not validated there.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from stash_core.catalog.accelerators import Accelerator, find_accelerator
from stash_core.decide.predict.calibration import Point, fit_efficiencies
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.network import CommTime, comm_time
from stash_core.decide.predict.roofline import Efficiency, compute_time
from stash_core.decide.predict.step_cost import StepCost, step_cost
from stash_core.decide.predict.validation import expected_error, published_points


@dataclass
class ConfigPrediction:
    instance: str
    accelerator: str | None
    instance_count: int
    workers_per_instance: int
    path: str  # "measured" | "scaled" | "roofline"
    basis: str
    compute_s: float
    interconnect_s: float
    network_s: float
    expected_error: float | None
    memory_needed_gb: float
    memory_gb: float
    notes: list[str] = field(default_factory=list)

    @property
    def iteration_s(self) -> float:
        return self.compute_s + self.interconnect_s + self.network_s


@functools.lru_cache(maxsize=32)
def calibrated(extra_points: tuple[Point, ...] = ()) -> Efficiency:
    """Efficiencies fitted to the published figures plus any measured GPU profiles given."""
    return fit_efficiencies([*published_points(), *extra_points])


class Predictor:
    """Predictions for one model at one batch size, calibrated once for every configuration asked."""

    def __init__(
        self,
        model: str,
        batch_size: int,
        catalog: dict[str, dict[str, Any]],
        profiles: list[dict[str, Any]] | None = None,
        precision: str = "fp32",
        input_shape: tuple[int, ...] | None = None,
    ) -> None:
        # UsageError for an unknown model or a shape it cannot take
        self.cost: StepCost = step_cost(model, batch_size, input_shape)
        # A profile that names no input shape ran with the model's default one.
        default = step_cost(model, batch_size) if input_shape else self.cost
        self.default_shape = default.input_shape
        self.model, self.batch_size, self.catalog, self.precision = model, batch_size, catalog, precision
        self.profiles = profiles or []
        extra = tuple(self._calibration_points())
        self.efficiency = calibrated(extra)
        self.calibration_note = f"{len(published_points())} published figures + {len(extra)} stored profiles"

    def _calibration_points(self) -> list[Point]:
        points = []
        for row in self.profiles:
            accelerator = self._accelerator(row.get("instance"))
            per_worker = row.get("compute_s")
            if accelerator is None or not per_worker or not countable(row):
                continue
            points.append(
                Point(str(row["model"]), int(row["batch_size"]), accelerator.name, "fp32",
                      float(per_worker), f"profile {row['run_id']}", profile_shape(row))
            )  # fmt: skip
        return points

    def _accelerator(self, instance: Any) -> Accelerator | None:
        row = self.catalog.get(str(instance)) if instance else None
        return find_accelerator(row.get("accelerator")) if row else None

    def predict(self, name: str, workers: int, count: int) -> ConfigPrediction | str:
        """The prediction for `count` x `name` with `workers` GPUs each, or why there is none."""
        instance = self.catalog[name]
        accelerator = find_accelerator(instance.get("accelerator"))
        if accelerator is None:
            what = instance.get("accelerator") or "no accelerator"
            return f"{name}: not predictable - {what} has no entry in the accelerator table"
        memory = memory_check(self.cost, accelerator, self.precision)
        if not memory.fits:
            return f"{name}: does not fit - {memory.note}"
        compute = compute_time(self.cost, accelerator, self.precision, self.efficiency)
        path, basis, compute_s, error = self._compute_path(name, accelerator, compute.step_s)
        backward_s = compute_s * compute.backward_s / compute.step_s
        comm = comm_time(
            4.0 * self.cost.param_count, workers, count, instance.get("interconnect"),
            instance.get("network_gbps"), accelerator, backward_s,
        )  # fmt: skip
        if not isinstance(comm, CommTime):
            return f"{count} x {name}: communication not predictable - {comm}"
        notes = [note for note in (memory.note,) if note]
        if comm.link:
            notes.append(f"all-reduce over {comm.link} (alpha-beta at nominal bandwidth, not validated)")
        return ConfigPrediction(
            name, accelerator.name, count, workers, path, basis, compute_s, comm.interconnect_s,
            comm.network_s, error, memory.needed_gb, memory.available_gb, notes,
        )  # fmt: skip

    def _compute_path(self, name: str, accelerator: Accelerator, roofline_s: float):
        same = [row for row in self._same_model() if row["instance"] == name]
        if same:
            row = same[0]
            return "measured", f"compute of profile {row['run_id']}", float(row["compute_s"]), None
        for row in self._same_model():
            base = self._accelerator(row["instance"])
            if base is None:
                continue
            base_s = compute_time(self.cost, base, self.precision, self.efficiency).step_s
            scaled = float(row["compute_s"]) * roofline_s / base_s
            basis = f"compute of profile {row['run_id']} on {row['instance']} x roofline ratio"
            return "scaled", basis, scaled, expected_error("scaled", self.model)
        effs = self.efficiency
        basis = (
            f"roofline: {effs.for_precision(self.precision):.0%} of matrix peak, {effs.memory:.0%} of "
            f"memory bandwidth ({self.calibration_note})"
        )
        return "roofline", basis, roofline_s, expected_error("roofline", self.model)

    def _same_model(self) -> list[dict[str, Any]]:
        """Profiles of this model at this batch size and input shape."""
        return [
            row
            for row in self.profiles
            if row.get("model") == self.model
            and int(row.get("batch_size") or 0) == self.batch_size
            and (profile_shape(row) or self.default_shape) == self.cost.input_shape
        ]


def countable(row: dict[str, Any]) -> bool:
    """Whether a stored profile's model can be counted here (a script's cannot; a model file may be gone)."""
    if row.get("model_kind") == "script" or str(row.get("model", "")).startswith("script:"):
        return False
    try:
        step_cost(str(row["model"]), int(row["batch_size"]), profile_shape(row))
    except Exception:  # noqa: BLE001 - a model file that no longer builds only leaves out its profile
        return False
    return True


def profile_shape(row: dict[str, Any]) -> tuple[int, ...]:
    """The input shape a stored profile ran with (its spec's input_shape, JSON text), () when not given."""
    text = row.get("input_shape")
    if not isinstance(text, str) or not text.strip() or text.strip() == "null":
        return ()
    try:
        return tuple(int(size) for size in json.loads(text))
    except (TypeError, ValueError):
        return ()
