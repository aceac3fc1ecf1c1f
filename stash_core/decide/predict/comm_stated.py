"""The communication error a prediction states, chosen so that it holds for a job never seen.

The held-out step-time errors (each source predicted with the factors fitted on the others) give, per scope
(one machine, several machines), a percentile of their absolute values. Which percentile: the lowest of
LEVELS at which a job never seen is covered STATED_SHARE of the time on average. A job is a codebase: one
source's one model (its training script, its extra collectives, its data loading). Each codebase's figures are
checked against the error stated from every other codebase's held-out figures alone, and each codebase counts
once whatever its number of figures. A pooled 80th percentile is set by the source with most figures (Lambda's
327) and covered 60% of a set collected later (docs/multi-gpu-final.md); a percentile chosen source by source
covered 56% of the next one (docs/multi-gpu-fresh.md), whose eight models each behave their own way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stash_core.decide.predict.comm_fit import SCOPES

PYTORCH = "pytorch"
MIN_FIGURES = 5
UNVALIDATED_FACTOR = 1.5  # a scope with too few held-out figures: one machine's error, wider (a judgement)
STATED_SHARE = 0.8
LEVELS = tuple(round(0.80 + 0.01 * step, 2) for step in range(20))  # the percentiles tried, 80th to 99th


def stated_quantile(errors: pd.Series, level: float = STATED_SHARE) -> float | None:
    values = np.abs(np.asarray(errors, dtype=float))
    values = values[np.isfinite(values)]
    return float(np.quantile(values, level, method="higher")) if len(values) else None


def _in_scope(frame: pd.DataFrame, scope: str) -> pd.DataFrame:
    return frame[(frame["nodes"] > 1) == (scope == SCOPES[1])] if not frame.empty else frame


def stated_at(frame: pd.DataFrame, level: float) -> tuple[dict[str, float | None], dict[str, int]]:
    """Per scope, the `level` percentile of the PyTorch figures' held-out step-time errors, and how many
    figures it is taken from. A scope with fewer than MIN_FIGURES takes one machine's error times
    UNVALIDATED_FACTOR (its count says it is unvalidated)."""
    pytorch = frame[frame["framework"] == PYTORCH]
    stated: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for scope in SCOPES:
        rows = _in_scope(pytorch, scope)
        counts[scope] = len(rows)
        stated[scope] = stated_quantile(rows["step_error"], level) if len(rows) >= MIN_FIGURES else None
    if stated[SCOPES[1]] is None and stated[SCOPES[0]] is not None:
        stated[SCOPES[1]] = round(stated[SCOPES[0]] * UNVALIDATED_FACTOR, 4)
    return stated, counts


def covered(
    frame: pd.DataFrame, stated: dict[str, float | None], by_class: dict[str, float] | None = None
) -> np.ndarray:
    """Per row of `frame`, whether its step error is within its scope's stated error (False: none stated),
    or within its interconnect class's where `by_class` has a wider one (as a prediction on such links
    shows it)."""
    limits = np.array([stated.get(SCOPES[1] if nodes > 1 else SCOPES[0]) or 0.0 for nodes in frame["nodes"]])
    if by_class:  # a class widens a stated error, never states one where its scope has none
        wider = np.maximum(limits, [by_class.get(str(name), 0.0) for name in frame["link_class"]])
        limits = np.where(limits > 0, wider, 0.0)
    return np.abs(frame["step_error"].to_numpy(dtype=float)) <= np.where(limits > 0, limits, -1.0)


def coverage(
    frame: pd.DataFrame, stated: dict[str, float | None], by_class: dict[str, float] | None = None
) -> dict[str, float | None]:
    """Per scope, the share of its rows whose step error is within its stated error (None: no rows); with
    `by_class`, an interconnect class's where wider."""
    shares: dict[str, float | None] = {}
    for scope in SCOPES:
        rows = _in_scope(frame, scope)
        hits = covered(rows, stated, by_class)
        shares[scope] = float(hits.mean()) if len(rows) and stated.get(scope) else None
    return shares


def codebases(frame: pd.DataFrame) -> pd.Series:
    """Each row's codebase: its source and model."""
    return frame["source_id"].astype(str) + "/" + frame["model"].astype(str)


def coverage_by_codebase(frame: pd.DataFrame, level: float) -> pd.DataFrame:
    """Each PyTorch codebase's held-out figures against the error stated at `level` from the other
    codebases' held-out figures alone: one row per codebase with its figures and the share covered."""
    pytorch = frame[frame["framework"] == PYTORCH]
    names = codebases(pytorch)
    rows = []
    for codebase in sorted(set(names)):
        own = pytorch[names == codebase]
        stated, _ = stated_at(pytorch[names != codebase], level)
        share = float(covered(own, stated).mean())
        rows.append({"codebase": codebase, "figures": len(own), "covered": share})
    return pd.DataFrame(rows, columns=["codebase", "figures", "covered"])


def codebase_level(frame: pd.DataFrame) -> float:
    """The lowest of LEVELS at which a codebase never seen is covered STATED_SHARE of the time on average
    (each codebase counted once); the highest of LEVELS if none is."""
    for level in LEVELS:
        by_codebase = coverage_by_codebase(frame, level)
        if len(by_codebase) and by_codebase["covered"].mean() >= STATED_SHARE:
            return level
    return LEVELS[-1]


def class_errors(frame: pd.DataFrame, level: float, stated: dict[str, float | None]) -> dict[str, float]:
    """One machine's stated error per interconnect class, where a class's own held-out figures (at least
    MIN_FIGURES, of at least two codebases) run wider than the scope's at the same percentile: PCIe Gen3's
    misses are not NVSwitch H100's. `frame` holds rows' classes as the predictor names them."""
    pytorch = frame[(frame["framework"] == PYTORCH) & (frame["nodes"] == 1)]
    scope = stated.get(SCOPES[0]) or 0.0
    found: dict[str, float] = {}
    for klass, rows in pytorch.groupby("link_class"):
        if len(rows) < MIN_FIGURES or codebases(rows).nunique() < 2:
            continue
        error = stated_quantile(rows["step_error"], level)
        if error is not None and error > scope:
            found[str(klass)] = round(error, 4)
    return found


def stated_errors(frame: pd.DataFrame) -> tuple[dict[str, float | None], dict[str, int], float]:
    """(the stated error per scope, the figures behind each, the percentile chosen by codebase_level)."""
    level = codebase_level(frame)
    stated, counts = stated_at(frame, level)
    return stated, counts, level
