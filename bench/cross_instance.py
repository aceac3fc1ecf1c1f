"""Held-out error of Stash's predicted training step against published single-GPU figures.

Over stash_core/decide/predict/published_throughputs.csv (every row with its source, revision and table):
leave one source (software stack) out and leave one GPU die out for the step model alone ("roofline"); a
figure scaled from another GPU's figure of the same work by the step model's ratio ("scaled", within one
stack and across); and by the matrix peaks alone ("script"). Errors by source, GPU, model, precision and
batch regime; the stated error of each path (80th percentile of its held-out errors) and how many held-out
figures it covers (a die whose own held-out errors run wider states its own). With --write, the step model
fitted on every figure and the stated errors are written to validation_summary.json, which predictions read
(docs/validation.md's figures are this output).
With --timing, only the time to predict every catalog instance for one job (the step counted once, then
each instance): PYTHONPATH=. .venv/bin/python bench/cross_instance.py --timing
Then the step model on single-GPU figures from sources never used (bench/single_gpu_holdout.py), the
communication model against published multi-GPU figures (bench/comm_report.py, with --write its
comm_summary.json too) and the kernel model against NeuSight's measured kernels (bench/kernels.py).
Run: PYTHONPATH=. .venv/bin/python bench/cross_instance.py [--write] [--rows]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections import Counter
from pathlib import Path

import pandas as pd

from stash_core.decide.predict.calibration import fit_params
from stash_core.decide.predict.published import load_published
from stash_core.decide.predict.stated_error import build_summary, write_summary
from stash_core.decide.predict.validation import (
    other_sources_same_work,
    script_share,
    summary,
    validation_frames,
)

NEUSIGHT_MAE, HABITAT_MAE = 0.07, 0.118


def _mae(frame: pd.DataFrame) -> str:
    return f"{frame['abs_error'].mean():.1%} (n={len(frame)})" if len(frame) else "n/a (n=0)"


def _report(title: str, frame: pd.DataFrame, show_rows: bool) -> None:
    print(f"\n== {title}: mean absolute error {_mae(frame)}")
    if frame.empty:
        return
    for by in ("source_id", "gpu", "model", "precision", "regime"):
        print(summary(frame, (by,)).to_string(index=False))
    if show_rows:
        columns = ["model", "input_shape", "accelerator", "precision", "batch_size", "source_id", "base",
                   "measured_samples_per_s", "predicted_samples_per_s", "error"]  # fmt: skip
        print(frame[columns].round({"predicted_samples_per_s": 1, "error": 3}).to_string(index=False))


def timing() -> None:
    """Seconds to predict every catalog instance (ResNet-50, batch 64, AMP): the step counted once (cold:
    traced, then written to a fresh step cache; warm: read back), then each instance."""
    import os
    import tempfile
    from pathlib import Path

    from stash_core.decide.predict import step_cost as step_cost_module
    from stash_core.decide.predict.configuration import Predictor
    from stash_core.decide.predict.instances import catalog_rows, prediction_rows

    os.environ["STASH_CACHE_DIR"] = tempfile.mkdtemp(prefix="stash-steps-")
    catalog = catalog_rows(Path(tempfile.mkdtemp()) / "timing.duckdb", None)
    for state in ("cold", "warm"):
        step_cost_module._traced.cache_clear()
        started = time.perf_counter()
        predictor = Predictor("resnet50", 64, catalog, [], "amp")
        counted = time.perf_counter()
        frame, refused = prediction_rows(predictor, catalog, 64, None, 1)
        done = time.perf_counter()
        print(
            f"{state}: step counted in {counted - started:.2f} s; {len(catalog)} instances ({len(frame)} "
            f"predicted, {len(refused)} refused) in {done - counted:.3f} s"
        )


def _cross_stack_floor(points: list, loso: pd.DataFrame) -> None:
    """How far software stacks disagree on identical work, against Stash on the same figures."""
    others = other_sources_same_work(points)
    if others.empty:
        return
    key = ["model", "precision", "input_shape", "batch_size", "accelerator", "source_id"]
    same = loso.merge(others[key].drop_duplicates(), on=key)
    print(
        f"\nfigures another source timed for the same work on the same GPU variant: {len(others)}; "
        f"predicted by the other sources' measurements (no model) {others['abs_error'].mean():.1%} (median "
        f"{others['abs_error'].median():.1%}), by Stash with their source held out {_mae(same)}"
    )
    print(summary(others, ("source_id",)).to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="write validation_summary.json")
    parser.add_argument("--rows", action="store_true", help="print every held-out figure")
    parser.add_argument("--timing", action="store_true", help="time predicting every catalog instance")
    args = parser.parse_args()
    if args.timing:
        timing()
        return
    pd.set_option("display.width", 200)
    started = time.perf_counter()
    published = load_published()
    points = published.points
    print(
        f"{len(points)} usable single-GPU figures from {len({p.source_id for p in points})} sources, "
        f"{len({p.accelerator for p in points})} GPU variants, "
        f"models {', '.join(sorted({p.model for p in points}))}"
    )
    reasons = Counter(line.split(": ", 1)[1].split(" (")[0] for line in published.skipped)
    print(f"{len(published.skipped)} rows left out: " + "; ".join(f"{n} {why}" for why, n in reasons.items()))
    frames = validation_frames(points)
    roofline, scaled = frames["roofline"], frames["scaled"]
    _report("roofline, leave one source out", roofline[roofline["held_out"] == "source"], args.rows)
    _report("roofline, leave one GPU die out", roofline[roofline["held_out"] == "gpu"], args.rows)
    _report("scaled, within one software stack", scaled[scaled["held_out"] == "within"], args.rows)
    _report("scaled, across software stacks", scaled[scaled["held_out"] == "across"], False)
    _report("script path (GPU ratio, share fitted without the source), all pairs", frames["script"], False)
    params = fit_params(points)
    ratio_params = fit_params(points, ratios=True)
    share = script_share(points)
    result = build_summary(frames, params, len(points), published.skipped, share, ratio_params)
    print("\n== stated error (80th percentile of held-out absolute errors) and its coverage")
    for path, table in result["stated_error"].items():
        cells = ", ".join(f"{name} {value:.1%}" for name, value in table.items() if value is not None)
        print(f"{path}: {cells}; covers {result['coverage'][path]:.1%} of its held-out figures")
        dies = result["stated_error_by_gpu"][path]
        wider = ", ".join(f"{gpu} {value:.1%}" for gpu, value in dies.items() if value > table["all"])
        if wider:
            print(f"  dies whose own held-out errors run wider state them: {wider}")
    print(f"validated GPU dies: {', '.join(result['validated_gpus'])}")
    print("parameters fitted on every figure: " + ", ".join(f"{k} {v:.3g}" for k, v in params.values.items()))
    print(
        "and also on the ratios between GPUs (the scaled path's): "
        + ", ".join(f"{k} {v:.3g}" for k, v in ratio_params.values.items())
    )
    print(f"script path: matrix-peak ratio ^ {share:g} x bandwidth ratio ^ {1 - share:g} (all pairs' fit)")
    loso = roofline[roofline["held_out"] == "source"]
    neusight = loso[loso["source_id"] == "neusight"]
    by_die = roofline[(roofline["held_out"] == "gpu") & (roofline["source_id"] == "neusight")]
    print(
        f"\nleave-one-source-out roofline {loso['abs_error'].mean():.1%} against NeuSight's "
        f"~{NEUSIGHT_MAE:.0%} (unseen GPUs) and Habitat's {HABITAT_MAE:.1%}; on NeuSight's own labels: "
        f"source held out {_mae(neusight)}, their GPU die held out (NeuSight's own measure) {_mae(by_die)}"
    )
    _cross_stack_floor(points, loso)
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.write:
        write_summary(result)
        print("wrote stash_core/decide/predict/validation_summary.json")
    # Single-GPU figures of sources never used in any choice, communication (multi-GPU figures held out by
    # source) and the kernel model (held out by GPU).
    print("\n== single GPU, four sources never used (docs/single-gpu-holdout.md)")
    _bench_module("single_gpu_holdout").report(args.rows)
    _bench_module("comm_report").report(args.write, args.rows)
    print("\n== kernels (NeuSight's measured kernels, each GPU held out in turn)")
    _bench_module("kernels").report()


def _bench_module(name: str):
    """Another bench script of this folder, imported (bench/ is not a package)."""
    path = Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()
