"""Single-GPU predictions on the sets collected after the step model was fitted: the later sources, each held
out, then the untouched sets, predicted as shipped.

The later sets (published.LATER_CSVS: published_single_gpu_holdout.csv, docs/single-gpu-holdout.md, and
published_single_gpu_fresh.csv to _fresh7.csv, docs/single-gpu-fresh.md to docs/single-gpu-fresh7.md) were
each evaluated once as shipped; their PyTorch rows have since been pooled with published_throughputs.csv
(published.load_pool), so each figure here is predicted by the step model fitted on the pool without its
source, and checked against the ± error stated from every other source's held-out errors
(stated_error.stated_without): what a user bringing a source Stash never saw gets. This prints each figure's
error, the mean absolute error by framework, source, GPU, batch regime and layout, and how often the stated
error covers it. The pooled figures are the PyTorch ones of sources whose timed loop waits on no CPU loader
(published.is_pooled); the others (other frameworks, the loader-bound sources) are reported beside them, never
fitted.

Then, once each, the untouched sets (published.UNTOUCHED_CSVS: published_single_gpu_fresh8.csv,
docs/single-gpu-fresh8.md): sources collected after the later sets were pooled,
used in no fit or choice, each figure predicted as a user gets it (the shipped fit, the shipped stated error)
and reported the same way.

    .venv/bin/python bench/single_gpu_holdout.py [--rows]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_args import bench_parser  # noqa: E402

from stash_core.decide.predict.calibration import fit_params, predicted_s  # noqa: E402
from stash_core.decide.predict.published import (  # noqa: E402
    LATER_CSVS,
    UNTOUCHED_CSVS,
    chip,
    framework,
    is_pooled,
    load_pool,
    load_published,
    regime,
)
from stash_core.decide.predict.roofline import StepParams  # noqa: E402
from stash_core.decide.predict.stated_error import (  # noqa: E402
    UNVALIDATED_FACTOR,
    fitted_params,
    load_summary,
    stated_error,
    stated_without,
)


def held_out_stated(source: str, batch_size: int, accelerator: str) -> float | None:
    """The roofline path's stated error for a figure of `source` with every figure of it left out: its
    regime's, or its die's where wider, widened for a die no other source validated."""
    table, dies = stated_without(source)
    error = table.get(regime(batch_size)) or table.get("all")
    if error is None:
        return None
    die = chip(accelerator)
    if die not in dies and die not in ((load_summary() or {}).get("validated_gpus") or []):
        return error * UNVALIDATED_FACTOR
    return max(error, dies.get(die, 0.0))


def rows() -> list[dict]:
    """Every figure of the later sets, predicted by the pool's fit without its source and checked against the
    error stated without it (a source outside the pool: the whole pool's fit)."""
    pool = load_pool().points
    fits: dict[str, StepParams] = {}
    found = []
    for path in LATER_CSVS:
        published = load_published(path)
        for reason in published.skipped:
            print(f"skipped ({path.name}): {reason}")
        for point in published.points:
            source = point.source_id
            if source not in fits:
                fits[source] = fit_params([other for other in pool if other.source_id != source])
            stated = held_out_stated(source, point.batch_size, point.accelerator)
            found.append(_row(point, fits[source], stated))
    return found


def fresh_rows(path: Path) -> list[dict]:
    """A fresh set's figures as a user gets them: the shipped fit and the shipped stated error."""
    published = load_published(path)
    for reason in published.skipped:
        print(f"skipped: {reason}")
    params = fitted_params()
    return [
        _row(point, params, stated_error("roofline", point.batch_size, point.accelerator).error)
        for point in published.points
    ]


def _row(point, params: StepParams, stated: float | None) -> dict:
    step_s = predicted_s(point, params)
    unconverted = StepParams({**params.values, "nchw_relayout": 0.0})
    error = point.step_s / step_s - 1.0  # predicted throughput over measured, less one
    return {
        "model": point.model,
        "gpu": point.accelerator,
        "precision": point.precision,
        "layout": point.memory_format or "-",
        "batch": point.batch_size,
        "regime": regime(point.batch_size),
        "source": point.source_id,
        "framework": framework(point.measured),
        "pooled": is_pooled(point),
        "error": error,
        "stated": stated,
        "covered": stated is not None and abs(error) <= stated,
        "revision": point.revision,
        "measured_s": point.step_s,
        "predicted_s": step_s,
        "unconverted_s": predicted_s(point, unconverted),  # without the NCHW conversion
    }


def table(found: list[dict], key: str) -> None:
    groups: dict[str, list[dict]] = {}
    for row in found:
        groups.setdefault(str(row[key]), []).append(row)
    print(f"\n{key:<32} {'figures':>7} {'MAE':>7} {'bias':>7} {'covered':>8}")
    for name, members in sorted(groups.items()):
        mae = sum(abs(r["error"]) for r in members) / len(members)
        bias = sum(r["error"] for r in members) / len(members)
        covered = sum(r["covered"] for r in members) / len(members)
        print(f"{name:<32} {len(members):7d} {mae:7.1%} {bias:+7.1%} {covered:8.0%}")


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--rows", action="store_true", help="print every figure's error")
    report(parser.parse_args().rows)
    return 0


def report(print_rows: bool = False) -> None:
    """Every held-out figure's error (with print_rows), then the summaries; then each untouched set's
    (bench/cross_instance.py runs it)."""
    summarise(rows(), print_rows)
    for path in UNTOUCHED_CSVS:
        if path.exists():
            print(f"\n== fresh set ({path.name}), used in no fit or choice, predicted as shipped")
            summarise(fresh_rows(path), print_rows)
        else:
            print(f"\nno fresh set ({path.name} is missing)")


def summarise(found: list[dict], print_rows: bool) -> None:
    if print_rows:
        for r in found:
            print(
                f"{r['source']:<17} {r['framework']:<12} {r['model']:<13} {r['gpu']:<31} {r['precision']:<4} "
                f"{r['layout']:<5} {r['batch']:>4} {r['error']:+7.1%} (± {r['stated'] or 0:.0%})"
            )
    pytorch = [r for r in found if r["pooled"]]
    for label, members in (("PyTorch, loader-bound sources aside", pytorch), ("all", found)):
        if not members:
            print(f"{label}: no figures")
            continue
        mae = sum(abs(r["error"]) for r in members) / len(members)
        covered = sum(r["covered"] for r in members) / len(members)
        optimistic = sum(r["error"] > 0 for r in members) / len(members)
        print(
            f"{label}: {len(members)} figures, mean absolute error {mae:.1%}, stated error covers "
            f"{covered:.0%} ({source_coverage(members):.0%} of a source on average, each counted once), "
            f"{optimistic:.0%} predicted faster than measured"
        )
    for key in ("framework", "source", "gpu", "regime", "layout"):
        table(pytorch if key != "framework" else found, key)
    layouts(found)


def source_coverage(found: list[dict]) -> float:
    """The share of a source's figures the stated error covers, averaged over the sources: what the stated
    error's percentile is chosen for (stated_error.source_level), where a source of many figures does not
    outweigh the others."""
    by_source: dict[str, list[bool]] = {}
    for r in found:
        by_source.setdefault(r["source"], []).append(r["covered"])
    return sum(sum(hits) / len(hits) for hits in by_source.values()) / len(by_source)


def layouts(found: list[dict]) -> None:
    """Where one source timed a model in both memory formats (same revision, GPU and precision): NCHW's time a
    sample over channels last's, measured, predicted, and predicted without the NCHW conversion (what is left
    is the norms' FP32-sized traffic in NCHW), mean over the source's revisions."""
    pairs: dict[tuple, dict[str, dict]] = {}
    for r in found:
        if r["layout"] in ("nchw", "nhwc"):
            key = (r["source"], r["model"], r["gpu"], r["precision"], r["revision"])
            pairs.setdefault(key, {})[r["layout"]] = r
    ratios: dict[tuple, list[tuple[float, float, float]]] = {}
    for (source, model, _, precision, _), both in pairs.items():
        if len(both) < 2:
            continue
        nchw, nhwc = both["nchw"], both["nhwc"]
        per_sample = nhwc["batch"] / nchw["batch"]  # the two formats may run at different batches
        measured = nchw["measured_s"] / nhwc["measured_s"] * per_sample
        predicted = nchw["predicted_s"] / nhwc["predicted_s"] * per_sample
        unconverted = nchw["unconverted_s"] / nhwc["predicted_s"] * per_sample
        ratios.setdefault((source, model, precision), []).append((measured, predicted, unconverted))
    if not ratios:
        return
    heading = f"{'NCHW over channels last, time a sample':<56} {'measured':>9} {'predicted':>9}"
    print(f"\n{heading} {'no conv.':>9}")
    for (source, model, precision), values in sorted(ratios.items()):
        mean = [sum(v[i] for v in values) / len(values) for i in range(3)]
        label = f"{source} {model} {precision} ({len(values)})"
        print(f"{label:<56} {mean[0]:9.2f} {mean[1]:9.2f} {mean[2]:9.2f}")


if __name__ == "__main__":
    sys.exit(main())
