"""Held-out error of Stash's predicted training step against published single-GPU figures.

Over stash_core/decide/predict/published_throughputs.csv (every row with its source, revision and table) and
the PyTorch rows of the later sets pooled with them (published.load_pool: published_single_gpu_holdout.csv and
the seven fresh sets, docs/single-gpu-holdout.md and docs/single-gpu-fresh.md to -fresh7.md): leave one source
(software stack) out and leave one GPU die out for the step model alone ("roofline"); a figure scaled from
another GPU's figure of the same work by the step model's ratio ("scaled", within one stack and across); and
by the matrix peaks alone ("script"). Errors by source, GPU, model, precision and batch regime; the stated
error of each path (a percentile of its held-out errors, stated_error.py) and how many held-out figures it
covers (a die whose own held-out errors run wider states its own), and per source how often the error stated
from every other source's held-out figures covers its own (a source never seen). With --write, the step model
fitted on every figure and the stated errors are written to validation_summary.json, which predictions read
(docs/validation.md's figures are this output). With --timing, only the time to predict every catalog instance
for one job (the step counted once, then each instance): PYTHONPATH=. .venv/bin/python bench/cross_instance.py
--timing
Then the step model on the later single-GPU sources, each held out, and on the untouched sets
(bench/single_gpu_holdout.py), the communication model against published multi-GPU figures
(bench/comm_report.py, with --write its comm_summary.json too), the kernel model against NeuSight's measured
kernels (bench/kernels.py) and summed over the published FP32 steps (bench/kernel_steps.py), and recurrent
layers counted as cuDNN calls against DeepBench's measured layers (bench/rnn_kernels.py).
Run: PYTHONPATH=. .venv/bin/python bench/cross_instance.py [--write] [--rows]
"""

from __future__ import annotations

import importlib.util
import time
from collections import Counter
from pathlib import Path

import pandas as pd
from bench_args import bench_parser

from stash_core.decide.predict.calibration import fit_params
from stash_core.decide.predict.published import LATER_CSVS, later_sources, load_pool
from stash_core.decide.predict.stated_error import (
    build_summary,
    coverage_by_source,
    figure_share,
    write_summary,
)
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
    for by in ("source_id", "gpu", "model", "precision", "regime", "layout"):
        print(summary(frame, (by,)).to_string(index=False))
    if show_rows:
        columns = ["model", "input_shape", "accelerator", "precision", "batch_size", "source_id", "base",
                   "measured_samples_per_s", "predicted_samples_per_s", "error"]  # fmt: skip
        print(frame[columns].round({"predicted_samples_per_s": 1, "error": 3}).to_string(index=False))


def timing() -> None:
    """Seconds to predict every catalog instance (ResNet-50, batch 64, AMP): the step counted once (cold:
    traced, then written to a fresh step cache; warm: read back), then each instance. The step cache and the
    catalog's database are temporary folders, removed at the end."""
    import tempfile

    from predict_catalog import fresh_step_cache

    from stash_core.decide.predict import step_cost as step_cost_module
    from stash_core.decide.predict.configuration import Predictor
    from stash_core.decide.predict.instances import catalog_rows, prediction_rows

    with fresh_step_cache(), tempfile.TemporaryDirectory(prefix="stash-timing-") as folder:
        catalog = catalog_rows(Path(folder) / "timing.duckdb", None)
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
    parser = bench_parser(__doc__)
    parser.add_argument("--write", action="store_true", help="write validation_summary.json")
    parser.add_argument("--rows", action="store_true", help="print every held-out figure")
    parser.add_argument("--timing", action="store_true", help="time predicting every catalog instance")
    args = parser.parse_args()
    if args.timing:
        timing()
        return
    pd.set_option("display.width", 200)
    started = time.perf_counter()
    published = load_pool()
    points = published.points
    later_ids = later_sources()
    pooled = [p for p in points if p.source_id in later_ids]
    print(
        f"{len(points)} usable single-GPU figures ({len(pooled)} of them the PyTorch rows of the later sets "
        f"{', '.join(path.name for path in LATER_CSVS)}, pooled) from {len({p.source_id for p in points})} "
        "sources, "
        f"{len({p.accelerator for p in points})} GPU variants, "
        f"models {', '.join(sorted({p.model for p in points}))}"
    )
    reasons = Counter(line.split(": ", 1)[1].split(" (")[0] for line in published.skipped)
    print(f"{len(published.skipped)} rows left out: " + "; ".join(f"{n} {why}" for why, n in reasons.items()))
    frames = validation_frames(points)
    roofline, scaled = frames["roofline"], frames["scaled"]
    _report("roofline, leave one source out", roofline[roofline["held_out"] == "source"], args.rows)
    loso_rows = roofline[roofline["held_out"] == "source"]
    print("by memory format and source (bias above 0: predicted faster than measured):")
    print(summary(loso_rows[loso_rows["layout"] != "-"], ("layout", "source_id")).to_string(index=False))
    later = loso_rows["source_id"].isin(later_ids)
    print(
        f"leave one source out: the {loso_rows.loc[~later, 'source_id'].nunique()} sources of "
        f"published_throughputs.csv {_mae(loso_rows[~later])}; the later sources' PyTorch figures "
        f"{_mae(loso_rows[later])}"
    )
    _report("roofline, leave one GPU die out", roofline[roofline["held_out"] == "gpu"], args.rows)
    _report("scaled, within one software stack", scaled[scaled["held_out"] == "within"], args.rows)
    _report("scaled, across software stacks", scaled[scaled["held_out"] == "across"], False)
    _report("script path (GPU ratio, share fitted without the source), all pairs", frames["script"], False)
    params = fit_params(points)
    ratio_params = fit_params(points, ratios=True)
    share = script_share(points)
    result = build_summary(frames, params, len(points), published.skipped, share, ratio_params)
    print("\n== stated error (a percentile of held-out absolute errors) and its coverage")
    for path, table in result["stated_error"].items():
        cells = ", ".join(f"{name} {value:.1%}" for name, value in table.items() if value is not None)
        level = result["stated_quantile"][path]
        print(
            f"{path}: {level:.0%} percentile: {cells}; covers {result['coverage'][path]:.1%} of its held-out "
            "figures"
        )
        dies = result["stated_error_by_gpu"][path]
        wider = ", ".join(f"{gpu} {value:.1%}" for gpu, value in dies.items() if value > table["all"])
        if wider:
            print(f"  dies whose own held-out errors run wider state them: {wider}")
    print(f"validated GPU dies: {', '.join(result['validated_gpus'])}")
    level = result["stated_quantile"]["roofline"]
    for shown in sorted({0.8, level}):
        by_source = coverage_by_source(roofline, shown)
        never_seen = by_source[by_source["regime"] == "all"]
        fresh = never_seen[never_seen["source_id"].isin(later_ids)]
        covered = figure_share(never_seen)
        print(
            f"\nroofline's {shown:.0%} percentile on a source never seen (each source's held-out figures "
            f"against the error stated from the other sources' alone): covers {covered:.1%} of "
            f"{never_seen['figures'].sum()} figures, {never_seen['covered'].mean():.1%} averaged over the "
            f"{len(never_seen)} sources; of the later sources' {fresh['figures'].sum()} figures "
            f"{figure_share(fresh):.1%}"
        )
        table = by_source.pivot(index="source_id", columns="regime", values="covered")
        counts = by_source.pivot(index="source_id", columns="regime", values="figures")
        cells = table.apply(lambda col: col.map(lambda v: "" if pd.isna(v) else f"{v:.0%}")) + counts.apply(
            lambda col: col.map(lambda n: "" if pd.isna(n) else f" ({int(n)})")
        )
        print(cells.fillna("").to_string())
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
    _measured_steps_check()  # the shipped summary's model and stated errors (just written with --write)
    # Single-GPU figures of sources never used in any choice, communication (multi-GPU figures held out by
    # source) and the kernel model (held out by GPU).
    print("\n== single GPU, the later sources, each held out (docs/single-gpu-holdout.md, -fresh*.md)")
    _bench_module("single_gpu_holdout").report(args.rows)
    _bench_module("comm_report").report(args.write, args.rows)
    print("\n== kernels (NeuSight's measured kernels, each GPU held out in turn)")
    _bench_module("kernels").report()
    print("\n== kernels summed over a step: the published FP32 steps (bench/kernel_steps.py)")
    _bench_module("kernel_steps").report(args.rows)
    print("\n== recurrent layers counted as cuDNN calls: DeepBench's measured layers (bench/rnn_kernels.py)")
    _bench_module("rnn_kernels").report(args.rows)


H100_STEPS = Path(__file__).resolve().parent.parent / "docs/measurements/h100-gpu-steps-2026-11-26-clocks.csv"


def _measured_steps_check() -> None:
    """Stash's own steps timed on a lent H100 SXM (bench/gpu_steps.py; in no fit), predicted again by the
    model just fitted, as gpu_steps.py predicts them: mean error and how many the stated error covers."""
    import csv

    from stash_core.decide.predict.calibration import Point, predicted_s
    from stash_core.decide.predict.stated_error import fitted_params, stated_error

    params, errors, covered = fitted_params(), [], 0
    with open(H100_STEPS, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            shape = tuple(int(size) for size in row["input"].split("x")) if row["input"] != "default" else ()
            layout = "" if row["layout"] == "-" else row["layout"]
            batch, accelerator = int(row["batch"]), "NVIDIA H100 SXM 80 GB"
            point = Point(
                row["model"], batch, accelerator, row["precision"], 1.0, "device", input_shape=shape,
                memory_format=layout,
            )  # fmt: skip
            error = float(row["measured_step_s"]) / predicted_s(point, params) - 1.0
            stated = stated_error("roofline", batch, accelerator).error
            errors.append(abs(error))
            covered += stated is not None and abs(error) <= stated
    print(
        f"\nStash's {len(errors)} steps timed on an H100 SXM ({H100_STEPS.name}; in no fit), predicted "
        f"again: mean absolute error {sum(errors) / len(errors):.1%}, {covered} of {len(errors)} within the "
        "stated error"
    )


def _bench_module(name: str):
    """Another bench script of this folder, imported (bench/ is not a package)."""
    path = Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()
