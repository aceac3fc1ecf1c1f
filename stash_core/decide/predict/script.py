"""Predictions for a profiled user script (`stash profile --script`, `stash predict --script-run RUN_ID`).

A script's model is the user's own code: Stash never built it, so there are no operator FLOPs and bytes to put
through the roofline. The compute of the profiled run is scaled instead: compute on the target GPU = measured
compute x the GPUs' ratio for unknown operators (gpu_ratio.py: the matrix-peak ratio in the precision asked
for, FP32, TF32 or FP16 tensor cores, blended with the memory-bandwidth ratio by a share fitted over published
figures). The ratio knows neither the script's split between compute- and memory-bound operators nor its
efficiency on each GPU, so its expected error is the larger one measured for this path over the published
figures (validation.ratio_from_other_gpu, stated per batch regime by stated_error.py). A run on the CPU is
refused: a CPU's time says nothing about a GPU's without the operators. Communication is the all-reduce model
of network.py over the run's stored gradient bytes, with backward taken as 2/3 of compute (its FLOPs are twice
the forward's); without stored gradient bytes only single-GPU configurations are predicted. Memory is not
checked (the script's is not known).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stash_core.catalog.accelerators import Accelerator, find_accelerator
from stash_core.decide.predict.comm_fit import comm_stated_error
from stash_core.decide.predict.configuration import ConfigPrediction, measured_interval_s
from stash_core.decide.predict.gpu_ratio import gpu_ratio
from stash_core.decide.predict.network import CommTime, comm_note, comm_time
from stash_core.decide.predict.profile_arithmetic import (
    cudnn_share,
    profile_accelerator,
    profile_precisions,
)
from stash_core.decide.predict.stated_error import fitted_script_share, stated_error
from stash_core.errors import StashError, UsageError, no_run_error
from stash_core.store import get_run
from stash_core.zoo_names import SCRIPT_HINT, refuse_script_name

BACKWARD_SHARE = 2.0 / 3.0  # backward's share of a step's compute: twice the forward's FLOPs
PATH = "GPU ratio"


@dataclass(frozen=True)
class ScriptRun:
    """What a prediction needs of one profiled script run."""

    run_id: str
    name: str
    instance: str | None
    accelerator: Accelerator
    batch_size: int | None
    workers: int
    nodes: int
    compute_s: float
    interconnect_s: float | None
    network_s: float | None
    grad_bytes: float | None
    iteration_ci95_s: float | None = None  # its whole step's 95% half-width (its configuration measured)


def script_run(db_path: Path | str, run_id: str, catalog: dict[str, dict[str, Any]]) -> ScriptRun:
    """The stored run `run_id` as a base for predictions; UsageError says why it cannot be one."""
    run = get_run(db_path, run_id)
    if run is None:
        if not Path(db_path).exists():  # a mistyped --db: say that, not that the run is missing
            raise no_run_error(run_id, db_path)
        raise UsageError(f"no run {run_id!r} in the database: see `stash runs`")
    full_id = run["run_id"]
    if run.get("model_kind") != "script":
        command = model_command(run, catalog)
        raise UsageError(
            f"run {full_id} profiled the model {run.get('model')}, not a script: use `{command}`"
        )
    if run.get("status") != "completed":
        raise UsageError(f"run {full_id} did not complete ({run.get('status')}): it measured no compute time")
    if not str(run.get("device") or "").startswith("cuda"):
        raise UsageError(
            f"run {full_id} ran on the CPU: without the script's operators a CPU's compute time cannot be "
            "scaled to a GPU; profile the script on one GPU instance (--device cuda --instance NAME) and "
            "predict from that run"
        )
    stalls = {row["stall"]: row.get("seconds") for row in run.get("stalls") or []}
    compute_s = stalls.get("compute")
    if not compute_s or compute_s <= 0:
        raise UsageError(f"run {full_id} has no measured compute time to scale")
    accelerator, _where = run_accelerator(run, catalog)
    if accelerator is None:
        raise UsageError(
            f"run {full_id}: its GPU ({_where}) has no entry in the accelerator table, so its compute "
            "cannot be scaled to other GPUs"
        )
    grad_bytes = run.get("grad_bytes")
    return ScriptRun(
        full_id, str(run.get("model")), run.get("instance"), accelerator,
        int(run["batch_size"]) if run.get("batch_size") else None,
        int(run.get("workers_per_node") or 1), int(run.get("nodes") or 1), float(compute_s),
        stalls.get("interconnect"), stalls.get("network"), float(grad_bytes) if grad_bytes else None,
        _script_interval_s(run, float(compute_s), stalls),
    )  # fmt: skip


def _script_interval_s(run: dict[str, Any], compute_s: float, stalls: dict[str, Any]) -> float | None:
    """Of the step a prediction measured whole (compute and communication, as _measured gives it)."""
    step_s = compute_s + (stalls.get("interconnect") or 0.0) + (stalls.get("network") or 0.0)
    return measured_interval_s(run, step_s)


def model_command(run: dict[str, Any], catalog: dict[str, dict[str, Any]]) -> str:
    """The `stash predict --model` command of the job a model's run profiled: its batch, its input shape and,
    for a run that measured TF32 convolutions (PyTorch's default on a GPU with TF32 units, for a model whose
    convolutions do most of its matrix work: profile_arithmetic.py), --precision tf32, so that the command's
    predictions take that very run instead of setting it aside as another precision."""
    model, batch = run.get("model"), run.get("batch_size")
    command = f"stash predict --model {model} --batch-size {batch}"
    shape = (run.get("spec") or {}).get("input_shape")
    if shape:
        command += " --input-shape " + ",".join(str(size) for size in shape)
    if _measured_tf32(run, catalog, tuple(shape) if shape else None):
        command += " --precision tf32"
    return command


def _measured_tf32(
    run: dict[str, Any], catalog: dict[str, dict[str, Any]], shape: tuple[int, ...] | None
) -> bool:
    gpus = (run.get("fingerprint") or {}).get("gpus") or []
    gpu_name = gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None
    row = {"device": run.get("device"), "instance": run.get("instance"), "gpu_name": gpu_name}
    accelerator = profile_accelerator(row, catalog)
    if accelerator is None or not accelerator.tf32_tflops:
        return False  # fp32 measured (a CPU, an unknown GPU) or the same either way (no TF32 units)
    from stash_core.decide.predict.step_cost import step_cost  # loads torch: only on this path

    try:
        share = cudnn_share(step_cost(str(run.get("model")), int(run.get("batch_size") or 0), shape))
    except StashError:  # the model's step cannot be counted: its precision is not known
        return False
    return profile_precisions(accelerator, share) == ("tf32",)


def run_accelerator(
    run: dict[str, Any], catalog: dict[str, dict[str, Any]]
) -> tuple[Accelerator | None, str]:
    """The run's GPU: the name its machine reported (NVML), else its instance label's catalog accelerator."""
    fingerprint = run.get("fingerprint") or {}
    names = [gpu.get("name") for gpu in fingerprint.get("gpus") or [] if isinstance(gpu, dict)]
    label = (catalog.get(str(run.get("instance"))) or {}).get("accelerator")
    for name in [*names[:1], label]:
        found = find_accelerator(name)
        if found is not None:
            return found, str(name)
    return None, ", ".join(str(name) for name in [*names[:1], label] if name) or "not recorded"


class ScriptPredictor:
    """Predictions for each configuration from one profiled script run (see the module's docstring)."""

    def __init__(self, base: ScriptRun, catalog: dict[str, dict[str, Any]], precision: str) -> None:
        self.base, self.catalog, self.precision = base, catalog, precision

    def predict(self, name: str, workers: int, count: int) -> ConfigPrediction | str:
        instance = self.catalog[name]
        accelerator = find_accelerator(instance.get("accelerator"))
        if accelerator is None:
            what = instance.get("accelerator") or "no accelerator"
            return f"{name}: not predictable - {what} has no entry in the accelerator table"
        base = self.base
        notes = [self._memory_note(accelerator)]
        if name == base.instance and (workers, count) == (base.workers, base.nodes):
            return self._measured(name, accelerator, notes)
        share = fitted_script_share()
        ratio = gpu_ratio(base.accelerator.name, accelerator.name, self.precision, share)
        compute_s = base.compute_s * ratio
        if (workers > 1 or count > 1) and base.grad_bytes is None:
            return (
                f"{count} x {name}: communication not predictable - run {base.run_id} stored no gradient "
                "size (the script's parameters are not known)"
            )
        comm = comm_time(
            base.grad_bytes or 0.0, workers, count, instance.get("interconnect"),
            instance.get("network_gbps"), accelerator, compute_s, compute_s * BACKWARD_SHARE,
            instance.get("provider"),
        )  # fmt: skip
        if not isinstance(comm, CommTime):
            return f"{count} x {name}: communication not predictable - {comm}"
        if comm.link:
            notes.append(comm_note(comm.link, count, comm.link_class))
        stated = stated_error("script", base.batch_size, accelerator.name)
        notes += [stated.note] if stated.note else []
        peaks = "/".join(f"{gpu.matrix_tflops(self.precision):g}" for gpu in (base.accelerator, accelerator))
        bandwidths = "/".join(f"{gpu.memory_gbs:g}" for gpu in (base.accelerator, accelerator))
        basis = (
            f"compute of script run {base.run_id} on {base.accelerator.name} x {ratio:.2f} ({self.precision} "
            f"matrix peaks {peaks} TFLOPS weighted {share:g}, memory {bandwidths} GB/s {1 - share:g})"
        )
        comm_error = comm_stated_error(count, comm.link_class)[0] if workers * count > 1 else None
        return ConfigPrediction(
            name, accelerator.name, count, workers, PATH, basis, compute_s, comm.interconnect_s,
            comm.network_s, stated.error, float("nan"), accelerator.memory_gb, notes, stated.validated,
            comm_error, run_id=base.run_id,
        )  # fmt: skip

    def _measured(self, name: str, accelerator: Accelerator, notes: list[str]) -> ConfigPrediction:
        base = self.base
        return ConfigPrediction(
            name, accelerator.name, base.nodes, base.workers, "measured", f"script run {base.run_id}",
            base.compute_s, base.interconnect_s or 0.0, base.network_s or 0.0, None, float("nan"),
            accelerator.memory_gb, notes, measured=True,  # the run's own configuration: its step as measured
            run_id=base.run_id, iteration_ci95_s=base.iteration_ci95_s,
        )  # fmt: skip

    def _memory_note(self, accelerator: Accelerator) -> str:
        note = "memory not checked (the script's use of it is not known)"
        ran_gb = self.base.accelerator.memory_gb
        if accelerator.memory_gb < ran_gb:
            note += f": it ran on a {ran_gb:g} GB GPU, this one has {accelerator.memory_gb:g} GB"
        return note


def refuse_profiled_script(model: str) -> None:
    """UsageError for a profiled script's runs ("script:train.py") asked for as a model: they are predicted
    from a run (the name is no importable model)."""
    refuse_script_name(model, SCRIPT_HINT)
