"""FP32 training steps predicted by summing the kernel model over the step's operators, beside the roofline.

The kernel model (stash_core/decide/predict/kernels.py) is fitted on NeuSight's measured FP32 kernels; here it
times every operator of a published FP32 step (the meta-device trace the step model counts): convolutions
(forward and backward) by its conv class, mm/addmm by linear, bmm, baddbmm and fused attention by bmm,
softmax by softmax, layer and batch norm by layernorm, every other operator by elementwise. A convolution's
backward is timed as two kernels of half its FLOPs, bytes and tiles each (its input and weight gradients;
their real shapes differ). Its fixed cost per kernel (CUDA events around one kernel) is left out: the step
model's launch cost per kernel stands for it, as in the roofline. What the kernels do not cover comes from
the step model fitted to the published steps with the figure's source left out: the optimizer step, the
per-step extras of the source's loop, the launch and the host's dispatch cost (combined with the GPU time as
the roofline does). So the comparison is of the operators' GPU time alone:
the step model's fitted efficiencies against kernels measured one at a time. The shared terms were fitted
together with the step model's efficiencies, so the comparison leans towards the step model.

Variants, on every published FP32 figure of the fitted pool (TF32 and AMP steps run their matrix work on
tensor cores, which NeuSight's kernels do not time):
  roofline      the step model, the figure's source left out (what ships, as validation.py holds it out)
  kernels       the kernel model fitted on every GPU's kernels
  kernels-die   the kernel model fitted without the figure's GPU die's kernels

    PYTHONPATH=. .venv/bin/python bench/kernel_steps.py [--rows]
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from bench_args import bench_parser

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.calibration import arrays_for, fit_params, predicted_s
from stash_core.decide.predict.kernel_table import load_kernels
from stash_core.decide.predict.kernels import KernelParams, fit, predict_kernel_s
from stash_core.decide.predict.published import chip, load_pool
from stash_core.decide.predict.roofline import optimizer_seconds, soft_max
from stash_core.decide.predict.step_cost import step_cost


def kernel_class(name: str, step_class: str) -> str:
    """The kernel model's class of a traced operator, from its name and the step model's class of it
    (op_classes.op_class, kept in the trace)."""
    if "convolution" in name:
        return "conv"
    if name in ("aten.mm", "aten.addmm"):
        return "linear"
    if step_class in ("matmul", "attention"):  # bmm, baddbmm, fused attention
        return "bmm"
    if "softmax" in name:
        return "softmax"
    if step_class == "normalisation":  # layer, batch and group norm
        return "layernorm"
    return "elementwise"


def kernel_ops_s(point, accelerator, kernels: KernelParams) -> tuple[float, int]:
    """(seconds of the step's operators by the kernel model, no fixed cost per kernel; their kernels)."""
    cost = step_cost(point.model, point.batch_size, point.input_shape, interpolate=True,
                     attention=point.attention or "fused")  # fmt: skip
    total_s, count = 0.0, 0
    for op in cost.ops:
        klass = kernel_class(op.name, op.op_class)
        split = max(op.kernels, 1)  # a convolution's backward is two kernels: input and weight gradients
        # its tiles and outputs are the whole operator's; a recurrent layer's (rnn.py) one kernel's already
        shape_split = 1 if op.name.startswith("stash.rnn") else split
        outputs = float(np.prod(op.gemm)) / shape_split if op.gemm else None
        one_s = predict_kernel_s(klass, op.flops / split, op.bytes / split, op.tiles / shape_split,
                                 accelerator, kernels, outputs)  # fmt: skip
        total_s += split * (one_s - kernels.values[klass]["launch_s"])  # the fixed cost is additive
        count += op.kernels
    return total_s, count


def kernel_step_s(point, params, kernels: KernelParams) -> float:
    """The step with its operators timed by the kernel model and the rest by the step model (params)."""
    accelerator = find_accelerator(point.accelerator)
    step = arrays_for(point)  # the optimizer's work, the loop's extras in it, and every kernel to dispatch
    ops_s, op_kernels = kernel_ops_s(point, accelerator, kernels)
    gpu_s = ops_s + params["launch_s"] * op_kernels + optimizer_seconds(step, params)
    return float(soft_max(gpu_s, params["dispatch_s"] * step.total_kernels))


def summary(frame: pd.DataFrame, by: str | None) -> pd.DataFrame:
    groups = frame.groupby(["variant", by]) if by else frame.groupby("variant")
    table = pd.DataFrame({
        "figures": groups.size(),
        "mae_%": groups["error"].apply(lambda e: 100 * float(np.mean(np.abs(e)))),
        "bias_%": groups["error"].apply(lambda e: 100 * float(np.mean(e))),
    }).round(1)  # fmt: skip
    return table.reset_index()


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--rows", action="store_true", help="print every figure's errors")
    report(parser.parse_args().rows)
    return 0


def report(show_rows: bool = False) -> None:
    """The three variants' errors on the pool's FP32 figures (bench/cross_instance.py runs it too)."""
    started = time.monotonic()
    pool = load_pool(count=False).points
    points = [point for point in pool if point.precision == "fp32"]
    frame = load_kernels()
    every_gpu = fit(frame)
    by_die: dict[str, KernelParams] = {}
    step_fits = {}
    rows = []
    for figure, point in enumerate(points):
        if point.source_id not in step_fits:
            step_fits[point.source_id] = fit_params([p for p in pool if p.source_id != point.source_id])
        params = step_fits[point.source_id]
        die = chip(point.accelerator)
        if die not in by_die:
            kept = frame[frame["gpu"].map(chip) != die]
            by_die[die] = fit(kept) if len(kept) < len(frame) else every_gpu
        predictions = {
            "roofline": predicted_s(point, params),
            "kernels": kernel_step_s(point, params, every_gpu),
            "kernels-die": kernel_step_s(point, params, by_die[die]),
        }
        for variant, step_s in predictions.items():
            rows.append({
                "variant": variant, "figure": figure, "source": point.source_id, "die": die,
                "model": point.model, "batch": point.batch_size, "error": point.step_s / step_s - 1.0,
            })  # fmt: skip
    found = pd.DataFrame(rows)
    if show_rows:
        index = ["figure", "source", "die", "model", "batch"]
        wide = found.pivot(index=index, columns="variant", values="error")
        print((100 * wide).round(1).to_string())
    print(f"\n{len(points)} FP32 figures of the fitted pool, each source held out of the step model's fit; "
          "error = predicted throughput / published - 1")  # fmt: skip
    for by in (None, "die", "model", "source"):
        print()
        print(summary(found, by).to_string(index=False))
    print("\nwithout the K80 (no kernel of its architecture was measured):")
    print(summary(found[found["die"] != "K80"], None).to_string(index=False))
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    raise SystemExit(main())
