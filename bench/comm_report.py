"""Held-out error of Stash's predicted communication against published multi-GPU training figures.

Over stash_core/decide/predict/published_multi_gpu.csv (each n-GPU figure with its source's one-GPU figure of
the same work): the predicted scaling efficiency (one-GPU step over the predicted n-GPU step, the one-GPU step
taken as published) against the published one, each source predicted with the factors fitted on the other
PyTorch sources; errors in efficiency points by source, interconnect class and node count, and how often the
prediction is the optimistic one. Then the final held-out set (published_multi_gpu_holdout.csv, sources that
played no part in any choice or fit) with the stated error's coverage there. With --write, the factors fitted
on every PyTorch source and the stated errors go to comm_summary.json, which predictions read.
Run alone or from bench/cross_instance.py: PYTHONPATH=. .venv/bin/python bench/comm_report.py [--write] [--rows]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from stash_core.decide.predict.comm_fit import write_comm_summary
from stash_core.decide.predict.comm_validation import (
    HOLDOUT_CSV,
    PYTORCH,
    build_comm_summary,
    cases,
    coverage,
    load_figures,
    predict_case,
    summary_table,
)
from stash_core.decide.predict.ddp_overlap import CommParams


def _print(title: str, table: pd.DataFrame) -> None:
    print(f"\n-- {title}")
    print(table.round(3).to_string(index=False) if not table.empty else "(none)")


def _shares(shares: dict, frame: pd.DataFrame) -> str:
    counts = {"one machine": int((frame["nodes"] == 1).sum()), "several machines": int((frame["nodes"] > 1).sum())}
    return ", ".join(
        f"{scope} {share:.1%} of {counts[scope]}" if share is not None else f"{scope}: no figures"
        for scope, share in shares.items()
    )


def _holdout(params: CommParams, stated: dict, show_rows: bool) -> None:
    figures = load_figures(HOLDOUT_CSV)
    if not figures:
        print(f"\nno final held-out set ({HOLDOUT_CSV.name} is missing)")
        return
    built, skipped = cases(figures)
    frame = pd.DataFrame([predict_case(case, params) for case in built])
    print(f"\n== final held-out set: {len(figures)} figures, {len(built)} predictable; left out: {skipped}")
    if frame.empty:
        return
    _print("by framework", summary_table(frame, ["framework"]))
    _print("by source", summary_table(frame, ["source_id"]))
    _print("by interconnect class and node count", summary_table(frame, ["intra_node", "nodes"]))
    pytorch = frame[frame["framework"] == PYTORCH]
    shares = coverage(pytorch, stated)
    print("stated error's coverage of the final held-out PyTorch figures: " + _shares(shares, pytorch))
    if show_rows:
        print(frame.round(3).to_string(index=False))


def report(write: bool = False, show_rows: bool = False) -> dict:
    started = time.perf_counter()
    figures = load_figures()
    summary, frame, skipped = build_comm_summary(figures)
    print(
        f"\n== communication: {len(figures)} multi-GPU figures, {summary['figures']} predictable; left out: {skipped}"
    )
    params = summary["params"]
    print(f"fitted on {', '.join(summary['fitted_on'])}: contention {params['contention']:g}, jitter {params['jitter']:g}; "
          f"held out per source: {summary['held_out_params']}")  # fmt: skip
    pytorch = frame[frame["framework"] == PYTORCH]
    _print("PyTorch stacks, each source held out", summary_table(pytorch, ["source_id"]))
    _print(
        "PyTorch stacks by interconnect class and node count", summary_table(pytorch, ["intra_node", "nodes"])
    )
    _print("PyTorch stacks by model", summary_table(pytorch, ["model"]))
    _print(
        "other frameworks (not fitted)",
        summary_table(frame[frame["framework"] != PYTORCH], ["source_id", "intra_node"]),
    )
    stated, counts, validated = summary["stated_error"], summary["stated_from_figures"], summary["validated"]
    cells = ", ".join(
        f"{scope} ±{value:.1%} from {counts[scope]} figures" + ("" if validated[scope] else " (unvalidated)")
        for scope, value in stated.items() if value is not None
    )  # fmt: skip
    print(f"\nstated communication error (80th percentile of held-out step-time errors): {cells}")
    print("its coverage of the held-out PyTorch figures: " + _shares(summary["coverage"], pytorch))
    if show_rows:
        print(frame.round(3).to_string(index=False))
    _holdout(CommParams(**params), stated, show_rows)
    print(f"({time.perf_counter() - started:.0f} s)")
    if write:
        write_comm_summary(summary)
        print("wrote stash_core/decide/predict/comm_summary.json")
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="write comm_summary.json")
    parser.add_argument("--rows", action="store_true", help="print every held-out figure")
    arguments = parser.parse_args()
    pd.set_option("display.width", 220)
    report(arguments.write, arguments.rows)
