"""Which precision a stored profile measured, so that its time stands only for jobs that train so.

Stash's measuring worker leaves PyTorch's defaults: cuDNN in TF32 where the GPU has TF32 tensor cores (Ampere
and newer), its convolutions and its recurrent layers alike (torch.backends.cudnn.allow_tf32 sets the math of
both descriptors), matrix products in FP32. So a profile of a convolutional or recurrent model on such a GPU
measured what `--precision tf32` names (the published figures of such loops are labelled tf32 the same way;
a CNN's fully connected layers stay FP32 there, 1% of a ResNet's or VGG's matrix work, 8.5% of AlexNet's: the
default `--precision pytorch` predicts each operator so, features.py), and one of a model of matrix products
(a transformer) what `fp32` names. On a GPU without TF32 units (a V100, a T4) both run
alike, so the profile stands for either; a CPU profile, or one on a GPU Stash has no row for, for fp32.
"""

from __future__ import annotations

from typing import Any

from stash_core.catalog.accelerators import Accelerator, find_accelerator
from stash_core.decide.predict.features import PYTORCH_ARITHMETIC
from stash_core.decide.predict.step_types import StepCost

# a step whose cuDNN operators do at least this share of its matrix work ran, as profiled, at the TF32 rate
CUDNN_MAJORITY = 0.5
# --precision's default: PyTorch's own arithmetic, where the job sets none (features.py)
DEFAULT_PRECISION = PYTORCH_ARITHMETIC


def default_precision(cost: StepCost | None) -> tuple[str, str]:
    """The precision PyTorch trains a step in when the job sets none, and why, as a profile measures it:
    tf32 where cuDNN does most of the matrix work (a GPU without TF32 units runs it on its FP32 cores), else
    fp32, also for a step that cannot be counted (a model known only by its profiles)."""
    if cost is None:
        return "fp32", "its operators unknown (a model known only by its profiles): each profile holds"
    if cudnn_share(cost) >= CUDNN_MAJORITY:
        return "tf32", "PyTorch's default for its convolutions and recurrent layers, where the GPU has TF32"
    return "fp32", "PyTorch's default for its matrix products"


def job_precision(asked: str, cost: StepCost | None) -> tuple[str, str | None]:
    """The precision a job asked with `asked` trains in, and why where Stash chose it (PyTorch's default);
    a model built in 16 bits trains in its own whatever is asked (features.run_precision), so no why."""
    if asked != DEFAULT_PRECISION:
        return asked, None
    precision, why = default_precision(cost)
    return precision, None if cost is not None and cost.half_weights else why


def precision_words(request: dict[str, Any]) -> str:
    """The precision a prediction's request restates: 'tf32 (PyTorch's default ...)' where none was given."""
    why = request.get("precision_why")
    return f"{request.get('precision', 'fp32')}{f' ({why})' if why else ''}"


def cudnn_share(cost: StepCost) -> float:
    """The share of the step's matrix-operator FLOPs that cuDNN runs: its convolutions and its recurrent
    layers' products (0 for a step without matrix work)."""
    matrix = [op for op in cost.ops if op.op_class in ("matmul", "attention")]
    total = sum(op.flops for op in matrix)
    cudnn = sum(op.flops for op in matrix if op.on_cudnn)
    return cudnn / total if total > 0 else 0.0


def profile_accelerator(row: dict[str, Any], catalog: dict[str, dict[str, Any]]) -> Accelerator | None:
    """A GPU profile's accelerator: its instance label's in the catalog, else the GPU its machine reported
    (NVML's name in the run's fingerprint; not for a run on remote hosts, whose fingerprint is the launching
    machine's), else None."""
    if not str(row.get("device") or "cuda").startswith("cuda"):
        return None
    label = catalog.get(str(row.get("instance"))) if row.get("instance") else None
    found = find_accelerator(label.get("accelerator")) if label else None
    gpu_name = row.get("gpu_name")
    remote = str(row.get("hosts") or "null") not in ("null", "[]")  # the fingerprint is the launcher's then
    if found is None and not remote and isinstance(gpu_name, str) and gpu_name:
        found = find_accelerator(gpu_name)
    return found


def profile_precisions(accelerator: Accelerator | None, cudnn_part: float | None) -> tuple[str, ...]:
    """The precisions whose jobs a profile on `accelerator` (None: a CPU or an unknown GPU) measured, for a
    step whose cuDNN operators do `cudnn_part` of the matrix work (None: a step that could not be counted, a
    model known only by its profiles, taken as FP32)."""
    if accelerator is None:
        return ("fp32",)
    if not accelerator.tf32_tflops:
        return ("fp32", "tf32")
    if cudnn_part is None:  # the step could not be counted: taken as FP32, its arithmetic unknown
        return ("fp32",)
    return ("tf32",) if cudnn_part >= CUDNN_MAJORITY else ("fp32",)


def machine_name(instance: Any) -> str:
    """A profile's instance label as a line names it; a profile run without --instance has none."""
    if instance is None or instance != instance or not str(instance).strip():  # None, NaN or empty
        return "an unlabelled machine"
    return str(instance)


def ran_as(precisions: tuple[str, ...]) -> str:
    """How a set-aside line says what a profile measured."""
    if precisions == ("tf32",):
        return "tf32 (PyTorch's default on this GPU: TF32 in cuDNN's convolutions and recurrent layers)"
    if precisions == ("fp32",):
        return "fp32"
    return " or ".join(precisions)


def other_input_line(row: dict[str, Any], ran_with: tuple[int, ...], job_shape: tuple[int, ...]) -> str:
    """The line of a profile set aside for its input shape, as predict and recommend both say it."""
    return (f"profile {row['run_id']} on {machine_name(row['instance'])}: set aside, it ran with input "
            f"{'x'.join(map(str, ran_with))}, the job's is {'x'.join(map(str, job_shape))}")  # fmt: skip
