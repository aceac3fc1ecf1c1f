"""The predicted iteration time of one configuration (instance type x instances x workers per instance).

Compute comes by one of three paths, the best available first:
  - "measured": a profile of the model at this batch on this instance type (its compute stall);
  - "scaled": a profile of the model at this batch on another GPU instance: its measured compute stall
    (which carries the model's own efficiency) times the ratio of the two GPUs' predicted steps;
  - "roofline": the step model alone (roofline.py, parameters fitted on the published figures).
Interconnect and network come from network.py (published NCCL bandwidths, DDP's overlap; its held-out error
is comm_fit.py's). The expected error is the held-out error of the compute path in the job's batch regime
(stated_error.py), widened and marked "unvalidated" on a GPU with no held-out figure.

The step's operators are counted once per Predictor (model, batch, input shape) and each GPU's compute time
once per accelerator, so predicting every instance of a catalog costs a few milliseconds per GPU type.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from stash_core.catalog.accelerators import Accelerator, find_accelerator
from stash_core.decide.predict.comm_fit import comm_stated_error
from stash_core.decide.predict.features import default_optimizer, run_precision
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.network import CommTime, comm_note, comm_time
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
from stash_core.decide.predict.rnn_validation import widened_for_recurrent
from stash_core.decide.predict.roofline import ComputeTime, StepParams, compute_time
from stash_core.decide.predict.stated_error import fitted_params, is_stale, load_summary, stated_error
from stash_core.decide.predict.step_cost import StepCost, calls_attention, default_input_shape, step_cost
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob, layout_kind
from stash_core.units import relative_ci95

# Why a configuration has no prediction, as its reason says it (counted by the pages, views/recommend.py)
DOES_NOT_FIT = "does not fit"  # the job's memory is more than the GPU's


class ComputePath(NamedTuple):
    """Where a configuration's compute time comes from: path ("measured", "scaled" or "roofline"), the
    words that say so, the seconds per iteration, and whether it carries no model error (measured, or
    scaled from this very GPU with the zoo's habits: a ratio of one)."""

    path: str
    basis: str
    step_s: float
    model_free: bool
    run_id: str | None = None  # the profile its compute comes from


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
    validated: bool = True  # False: no held-out figure of this GPU (the expected error is widened)
    # the held-out error of the step's communication, a fraction of the step (None: one worker, none to make)
    comm_error: float | None = None
    # the whole step as a profile measured it: this configuration's compute and communication (a "measured"
    # compute with predicted communication is a prediction)
    measured: bool = False
    run_id: str | None = None  # the stored profile its compute comes from (measured or scaled)
    iteration_ci95_s: float | None = None  # a step measured whole: its profile's 95% half-width

    @property
    def iteration_s(self) -> float:
        return self.compute_s + self.interconnect_s + self.network_s


def measured_interval_s(run: dict[str, Any], iteration_s: float) -> float | None:
    """A step measured whole, as a configuration's: its profile's (`run`, a runs or stall_breakdown row)
    relative 95% interval, of `iteration_s` (the configuration's step, which may leave out stalls its
    profile had); None where the profile stored none."""
    share = relative_ci95(run)
    return None if share is None else share * iteration_s


HALF_WEIGHTS = "16-bit weights (the model's own)"  # the precision of a model built in 16 bits, as restated


class Predictor:
    """Predictions for one model at one batch size, input shape and precision: the step counted once, each
    GPU's compute time once, for every configuration asked."""

    def __init__(
        self,
        model: str,
        batch_size: int,
        catalog: dict[str, dict[str, Any]],
        profiles: list[dict[str, Any]] | None = None,
        precision: str = "fp32",
        input_shape: tuple[int, ...] | None = None,
        params: StepParams | None = None,
        job: TrainingJob | None = None,
        mislabelled: list[str] | None = None,
    ) -> None:
        self.job = job or TrainingJob()
        # UsageError for an unknown model or a shape it cannot take
        self.cost: StepCost = step_cost(model, batch_size, input_shape, attention=self.job.step_attention)
        self.default_optimizer = default_optimizer(self.cost)
        # whether it calls fused attention: its fused trace says (an eager job's trace is decomposed)
        self.attends = (
            self.cost.fused_attention
            if self.job.step_attention == "fused"
            else calls_attention(model, self.cost.kind, batch_size, input_shape)
        )
        # UsageError for a habit the model cannot have
        self.job.check(
            layout_kind(self.cost.kind, self.cost.input_shape), self.default_optimizer, self.attends
        )
        self._input_given = bool(input_shape)
        # PyTorch's defaults are what every profile ran (Stash's workers leave them): each holds for the job
        self.default_arithmetic = precision == DEFAULT_PRECISION
        # the job's arithmetic as PyTorch leaves it, unless asked for one; why, for the output to restate
        precision, self.precision_why = job_precision(precision, self.cost)
        # a model built in 16 bits trains on the 16-bit units whatever precision is asked (features.py)
        precision = run_precision(self.cost, precision)
        self.model, self.batch_size, self.catalog, self.precision = model, batch_size, catalog, precision
        # what the step model runs: PyTorch's per operator (TF32 cuDNN, FP32 cuBLAS) where none was asked,
        # as every profile ran it, so a ratio between a profile and its own GPU stays one
        self.arithmetic = precision
        if self.default_arithmetic:
            self.arithmetic = run_precision(self.cost, DEFAULT_PRECISION)
        self.profiles = profiles or []
        # a line per profile of the job whose machine contradicts its label
        self.mislabelled = mislabelled or []
        self.params = params or fitted_params()
        # the scaled path predicts a ratio of two steps: the parameters fitted to ratios too (calibration.py)
        self.ratio_params = params or fitted_params(ratios=True)
        stale = (
            " (the published figures changed since: rerun bench/cross_instance.py --write)"
            if is_stale()
            else ""
        )
        figures = (load_summary() or {}).get("figures")
        self.calibration_note = (
            f"fitted on {figures} published figures{stale}"
            if figures
            else "uncalibrated prior: no validation summary"
        )
        self._compute: dict[tuple[str, bool, bool], ComputeTime] = {}

    def compute(
        self, accelerator: Accelerator, ratios: bool = False, as_profiled: bool = False
    ) -> ComputeTime:
        """The step model's compute time of the job on one GPU (cached per accelerator), with the parameters
        fitted to ratios between GPUs where it is one side of a ratio; as_profiled: of the job as `stash
        profile` runs it (the zoo's habits), the other side of a ratio from a profile."""
        key = (accelerator.name, ratios, as_profiled)
        found = self._compute.get(key)
        if found is None:
            params = self.ratio_params if ratios else self.params
            job = TrainingJob() if as_profiled else self.job
            found = self._compute[key] = compute_time(
                self.cost, accelerator, self.arithmetic, params,
                job.feature_optimizer(self.default_optimizer), job.feature_memory_format,
            )  # fmt: skip
        return found

    def predict(self, name: str, workers: int, count: int) -> ConfigPrediction | str:
        """The prediction for `count` x `name` with `workers` GPUs each, or why there is none."""
        instance = self.catalog[name]
        accelerator = find_accelerator(instance.get("accelerator"))
        if accelerator is None:
            what = instance.get("accelerator") or "no accelerator"
            return f"{name}: not predictable - {what} has no entry in the accelerator table"
        memory = memory_check(
            self.cost, accelerator, self.precision, self.job.optimizer or self.default_optimizer
        )
        if not memory.fits:
            return f"{name}: {DOES_NOT_FIT} - {memory.note}"
        compute = self.compute(accelerator)
        path, basis, compute_s, model_free, run_id = self._compute_path(name, accelerator, compute.step_s)
        stated = None if model_free else stated_error(path, self.batch_size, accelerator.name)
        if stated is not None and self.cost.recurrent:
            stated = widened_for_recurrent(stated)
        backward_s = compute_s * compute.backward_s / max(compute.forward_s + compute.backward_s, 1e-12)
        comm = comm_time(
            self.cost.gradient_bytes, workers, count, instance.get("interconnect"),
            instance.get("network_gbps"), accelerator, compute_s, backward_s, instance.get("provider"),
        )  # fmt: skip
        if not isinstance(comm, CommTime):
            return f"{count} x {name}: communication not predictable - {comm}"
        notes = [note for note in (memory.note, stated.note if stated else "") if note]
        if self.cost.half_weights and self.cost.bfloat16 and not accelerator.bf16_tflops:
            notes.append("bfloat16 on a GPU without BF16 matrix units: its products run on the FP32 cores")
        if self.precision == "tf32" and not self.default_arithmetic and not accelerator.tf32_tflops:
            notes.append("TF32 asked on a GPU without TF32 units: its products run in FP32")
        if compute.host_s >= compute.gpu_s and path != "measured":
            notes.append(f"overhead-bound: {compute.kernels} kernels dispatched from the host")
        comm_error = comm_stated_error(count, comm.link_class)[0] if workers * count > 1 else None
        interconnect_s, network_s = comm.interconnect_s, comm.network_s
        exact = self._exact_profile(name, workers, count) if path == "measured" else None
        if comm.link and exact is None:  # the predicted all-reduce's basis, where one is predicted
            notes.append(comm_note(comm.link, count, comm.link_class))
        if exact is not None:  # this very configuration was profiled: its communication too is measured
            interconnect_s, network_s, whole_row = exact
            comm_error = None
            basis = f"{basis}, communication as profiled"
        elif path == "measured" and workers > 1:  # more machines of a profiled one: its interconnect measured
            intra_s = self._measured_interconnect(name, workers)
            if intra_s is not None:
                interconnect_s = intra_s
                basis = f"{basis}, interconnect as profiled on {workers} GPUs of one machine"
        whole = path == "measured" and (exact is not None or workers * count == 1)
        if whole and exact is None:  # one worker: the step is the compute the profile measured
            whole_row = next(row for row in self._same_model() if row["run_id"] == run_id)
        step_s = compute_s + interconnect_s + network_s
        return ConfigPrediction(
            name, accelerator.name, count, workers, path, basis, compute_s, interconnect_s, network_s,
            stated.error if stated else None, memory.needed_gb, memory.available_gb, notes,
            stated.validated if stated else True, comm_error, whole, run_id,
            measured_interval_s(whole_row, step_s) if whole else None,
        )  # fmt: skip

    def _measured_interconnect(self, name: str, workers: int) -> float | None:
        """The interconnect stall a profile measured on `workers` GPUs of this instance (on any number of
        machines: R1 - R0 is one machine's either way), or None."""
        for row in self._same_model():
            if row["instance"] == name and int(row.get("workers_per_node") or 1) == workers:
                value = row.get("interconnect_s")
                if value is not None and value == value:  # NaN: not measured
                    return float(value)
        return None

    def _exact_profile(self, name: str, workers: int, count: int) -> tuple[float, float, dict] | None:
        """The measured interconnect and network of a profile of this very configuration, and its row; or
        None."""
        for row in self._same_model():
            shape = (row["instance"], int(row.get("workers_per_node") or 1), int(row.get("nodes") or 1))
            if shape != (name, workers, count):
                continue
            stalls = []
            measured = ((row.get("interconnect_s"), workers > 1), (row.get("network_s"), count > 1))
            for value, made in measured:
                known = value is not None and value == value  # NaN: a stall the profile did not measure
                if made and not known:
                    break  # not measured there: an older profile of it may have, else the model's figure
                stalls.append(float(value) if known else 0.0)
            else:
                return stalls[0], stalls[1], row
        return None

    def _compute_path(self, name: str, accelerator: Accelerator, model_s: float) -> ComputePath:
        same = [row for row in self._same_model() if row["instance"] == name]
        if same and self.job.is_default(self.default_optimizer):
            row = same[0]
            basis = f"compute of profile {row['run_id']}"
            return ComputePath("measured", basis, float(row["compute_s"]), True, row["run_id"])
        # a profile on this very GPU first (the ratio is then one: no model error), else the newest on any
        anchored = [(row, profile_accelerator(row, self.catalog)) for row in self._same_model()]
        anchored.sort(key=lambda pair: pair[1] is None or pair[1].name != accelerator.name)  # stable sort
        for row, base in anchored:
            if base is None:
                continue
            # the profile ran the zoo's habits: the ratio also carries the job's own (memory format, optimizer)
            ratio = self.compute(accelerator, ratios=True).step_s / self.compute(base, True, True).step_s
            scaled = float(row["compute_s"]) * ratio
            machine = machine_name(row["instance"])
            if base.name == accelerator.name and self.job.is_default(self.default_optimizer):
                basis = f"compute of profile {row['run_id']} on {machine}, the same GPU"
                return ComputePath("scaled", basis, scaled, True, row["run_id"])
            basis = f"compute of profile {row['run_id']} on {machine} x step-model ratio"
            return ComputePath("scaled", basis, scaled, False, row["run_id"])
        basis = f"step model ({self.calibration_note})"
        return ComputePath("roofline", basis, model_s, model_free=False)

    @functools.cached_property
    def default_shape(self) -> tuple[int, ...] | None:
        """The model's default input shape, which a profile that names none ran with (built only when a
        profile is compared: it loads torch)."""
        if not self._input_given:
            return self.cost.input_shape
        try:
            return default_input_shape(self.model)
        except UsageError:  # it cannot take its default (a token model built in 16 bits): no profile ran it
            return None

    def _same_model(self) -> list[dict[str, Any]]:
        """Profiles of this model at this batch size, input shape and precision (profile_arithmetic.py)."""
        return [row for row in self._same_work() if self._holds(row)]

    def set_aside(self) -> list[str]:
        """A line for each stored profile of this model and batch that ran another input shape, or measured
        another precision, and so anchors no prediction here (as recommend says them)."""
        shape = self.cost.input_shape
        other_input = [
            other_input_line(row, ran_with, shape)
            for row in self.profiles or []
            if row.get("model") == self.model and int(row.get("batch_size") or 0) == self.batch_size
            and (ran_with := profile_shape(row) or self.default_shape) is not None
            and tuple(ran_with) != shape
        ]  # fmt: skip
        return other_input + [
            f"profile {row['run_id']} on {machine_name(row['instance'])}: set aside, it ran in "
            f"{ran_as(self._ran_in(row))} and the job trains in {self.precision}"
            for row in self._same_work()
            if not self._holds(row)
        ]

    def _holds(self, row: dict[str, Any]) -> bool:
        return self.default_arithmetic or self.precision in self._ran_in(row)

    def _same_work(self) -> list[dict[str, Any]]:
        if not self.profiles:
            return []
        return [
            row
            for row in self.profiles
            if row.get("model") == self.model
            and int(row.get("batch_size") or 0) == self.batch_size
            and (profile_shape(row) or self.default_shape) == self.cost.input_shape
        ]

    @property
    def precision_label(self) -> str:
        """The precision the job trains in, as the output restates it."""
        return HALF_WEIGHTS if self.cost.half_weights else self.precision

    def _ran_in(self, row: dict[str, Any]) -> tuple[str, ...]:
        if self.cost.half_weights:  # its profiles too ran on the 16-bit units, whatever they were asked
            return ("amp",)
        return profile_precisions(profile_accelerator(row, self.catalog), self.cudnn_part)

    @functools.cached_property
    def cudnn_part(self) -> float:
        return cudnn_share(self.cost)


def profile_shape(row: dict[str, Any]) -> tuple[int, ...]:
    """The input shape a stored profile ran with (its spec's input_shape, JSON text), () when not given."""
    text = row.get("input_shape")
    if not isinstance(text, str) or not text.strip() or text.strip() == "null":
        return ()
    try:
        return tuple(int(size) for size in json.loads(text))
    except (TypeError, ValueError):
        return ()
