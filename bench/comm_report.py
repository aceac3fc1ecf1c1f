"""Held-out error of Stash's predicted communication against published multi-GPU training figures.

Over the fitted figures (stash_core/decide/predict/published_multi_gpu.csv and the later sets: holdout, final,
fresh, fresh2 and fresh3, each evaluated once as a test set and fitted since): each n-GPU figure with its
source's one-GPU figure of the same work, the predicted scaling efficiency (one-GPU step over the predicted
n-GPU step, the one-GPU step taken as published) against the published one, each source predicted with the
factors fitted on the other PyTorch sources; errors in efficiency points by source, interconnect class and
node count, and how often the prediction is the optimistic one. Then each test set (comm_validation.TEST_CSVS:
published_multi_gpu_fresh4.csv to fresh9.csv, figures collected before any prediction for them and in no fit,
each first predicted once on the model as it then stood; docs/multi-gpu-fresh4.md to docs/multi-gpu-fresh9.md)
with the stated error's coverage there. With --write, the factors fitted on every PyTorch source and the
stated errors go to comm_summary.json, which predictions read.
Run alone or from bench/cross_instance.py:

    PYTHONPATH=. .venv/bin/python bench/comm_report.py [--write] [--rows]
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from bench_args import bench_parser

from stash_core.decide.predict.comm_fit import write_comm_summary
from stash_core.decide.predict.comm_validation import (
    PYTORCH,
    TEST_CSVS,
    build_comm_summary,
    cases,
    coverage,
    fitted_figures,
    load_figures,
    predict_case,
    summary_table,
)
from stash_core.decide.predict.ddp_overlap import CommParams


def _print(title: str, table: pd.DataFrame) -> None:
    print(f"\n-- {title}")
    print(table.round(3).to_string(index=False) if not table.empty else "(none)")


def _shares(shares: dict, frame: pd.DataFrame) -> str:
    counts = {
        "one machine": int((frame["nodes"] == 1).sum()),
        "several machines": int((frame["nodes"] > 1).sum()),
    }
    return ", ".join(
        f"{scope} {share:.1%} of {counts[scope]}" if share is not None else f"{scope}: no figures"
        for scope, share in shares.items()
    )


def _overall(frame: pd.DataFrame) -> str:
    errors = frame["error_points"].to_numpy(dtype=float)
    if not len(errors):
        return "no figures"
    return (f"{len(errors)} figures: mean abs. error {np.mean(np.abs(errors)):.1f} points, mean error "
            f"{np.mean(errors):+.1f}, optimistic {np.mean(errors > 0):.0%}")  # fmt: skip


def _tables(frame: pd.DataFrame, label: str) -> None:
    pytorch = frame[frame["framework"] == PYTORCH]
    print(f"{label} PyTorch stacks, all: {_overall(pytorch)}")
    for scope, rows in (
        ("one machine", pytorch[pytorch["nodes"] == 1]),
        ("several machines", pytorch[pytorch["nodes"] > 1]),
    ):
        print(f"  {scope}: {_overall(rows)}")
    _print(f"{label} PyTorch stacks by source", summary_table(pytorch, ["source_id"]))
    _print(
        f"{label} PyTorch stacks by interconnect class and node count",
        summary_table(pytorch, ["intra_node", "nodes"]),
    )
    _print(f"{label} PyTorch stacks by node count", summary_table(pytorch, ["nodes"]))
    _print(f"{label} PyTorch stacks by GPU count", summary_table(pytorch, ["gpus"]))
    _print(f"{label} PyTorch stacks by model", summary_table(pytorch, ["model"]))
    _print(
        f"{label} other frameworks (not fitted)",
        summary_table(frame[frame["framework"] != PYTORCH], ["framework", "source_id"]),
    )


def _final(params: CommParams, stated: dict, by_class: dict, show_rows: bool) -> None:
    for path in TEST_CSVS:
        _test_set(path, params, stated, by_class, show_rows)


def _test_set(path, params: CommParams, stated: dict, by_class: dict, show_rows: bool) -> None:
    figures = load_figures(path)
    if not figures:
        print(f"\nno test set ({path.name} is missing)")
        return
    built, skipped = cases(figures)
    frame = pd.DataFrame([predict_case(case, params) for case in built])
    print(f"\n== test set {path.name}, in no fit: {len(figures)} figures, {len(built)} predictable; "
          f"left out: {skipped}")  # fmt: skip
    if frame.empty:
        return
    _tables(frame, "test set:")
    pytorch = frame[frame["framework"] == PYTORCH]
    print(
        "stated error's coverage of the test set's PyTorch figures: "
        + _shares(coverage(pytorch, stated), pytorch)
        + "; with an interconnect class's own where wider, as a prediction shows it: "
        + _shares(coverage(pytorch, stated, by_class), pytorch)
    )
    if show_rows:
        print(frame.round(3).to_string(index=False))


def report(write: bool = False, show_rows: bool = False) -> dict:
    started = time.perf_counter()
    figures = fitted_figures()
    summary, frame, skipped = build_comm_summary(figures)
    sets = ", ".join(summary["fitted_sets"])
    print(f"\n== communication: {len(figures)} fitted multi-GPU figures ({sets}), "
          f"{summary['figures']} predictable; left out: {skipped}")  # fmt: skip
    params = summary["params"]
    print(f"fitted on {', '.join(summary['fitted_on'])}: contention {params['contention']:g}, "
          f"jitter {params['jitter']:g}; held out per source: {summary['held_out_params']}")  # fmt: skip
    _tables(frame, "each source held out:")
    stated, counts, validated = summary["stated_error"], summary["stated_from_figures"], summary["validated"]
    cells = ", ".join(
        f"{scope} ±{value:.1%} from {counts[scope]} figures" + ("" if validated[scope] else " (unvalidated)")
        for scope, value in stated.items() if value is not None
    )  # fmt: skip
    percentile = round(summary["stated_percentile"] * 100)
    print(
        f"\nstated communication error (the {percentile}th percentile of held-out step-time errors, chosen "
        f"so that a job never seen, a source's model, is covered 80% of the time on average): {cells}"
    )
    wider = summary.get("stated_error_by_class") or {}
    print(
        "wider on one machine for an interconnect class whose own held-out errors run wider: "
        + (", ".join(f"{klass} ±{value:.1%}" for klass, value in sorted(wider.items())) or "none")
    )
    shares = summary["codebase_coverage"]
    below = [
        f"{name} {share:.0%}" for name, share in sorted(shares.items(), key=lambda i: i[1]) if share < 0.8
    ]
    print(
        f"each of the {len(shares)} jobs' coverage by the error stated from the other jobs alone: mean "
        f"{np.mean(list(shares.values())):.0%}; below 80%: " + ", ".join(below)
    )
    pytorch = frame[frame["framework"] == PYTORCH]
    print("its coverage of the held-out PyTorch figures: " + _shares(summary["coverage"], pytorch))
    if show_rows:
        print(frame.round(3).to_string(index=False))
    _final(CommParams(**params), stated, wider, show_rows)
    print(f"({time.perf_counter() - started:.0f} s)")
    if write:
        write_comm_summary(summary)
        print("wrote stash_core/decide/predict/comm_summary.json")
    return summary


if __name__ == "__main__":
    parser = bench_parser(__doc__)
    parser.add_argument("--write", action="store_true", help="write comm_summary.json")
    parser.add_argument("--rows", action="store_true", help="print every held-out figure")
    arguments = parser.parse_args()
    pd.set_option("display.width", 220)
    report(arguments.write, arguments.rows)
