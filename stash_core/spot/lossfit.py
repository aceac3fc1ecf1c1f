"""Fit spotDNN's loss model (eq. 3) to recorded loss curves: g1..g5 by nonlinear least squares, numpy only.

    L(b, R, n, j) = (g2 b + g3) sqrt((R + g4) n) / (j + g1) + g5

Data: rows of (batch b, workers n, iteration j, loss L), from short trainings at a few batch sizes and worker
counts or from the user's own training logs. j counts parameter updates over all workers (the paper's
normalised iterations); b is the batch of one worker's iteration (b_w of a cluster of like workers). R is
taken from a column when given, else that of n like workers, sqrt((n - 1) / n) (eq. 5).

Method (variable projection, then Levenberg-Marquardt):
  1. for fixed (g1, g4) the model is linear in (g2, g3, g5): L = g2 [b s/d] + g3 [s/d] + g5 with
     s = sqrt((R + g4) n), d = j + g1. A log-spaced grid over g1 (around the range of j) and g4 solves
     that linear least-squares problem at every node and keeps the best node;
  2. Levenberg-Marquardt over all five coefficients from there, with the analytic Jacobian, refuses steps
     that leave the model's domain (j + g1 > 0, R + g4 > 0) or do not lower the squared error.
g4 is identifiable only with at least two worker counts (R differs), and g2 against g3 only with at least
two batch sizes: fewer is refused.

Fit error: the mean absolute error relative to the loss (the paper reports 3.1%-11.7%). A fit whose error
is beyond MAX_FIT_ERROR is refused: it is not written to a workload file, and a workload file that records
one is refused by the planner (inputs.load_workload).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stash_core.errors import UsageError
from stash_core.spot.model import loss_scale
from stash_core.userfiles import read_user_text, refuse_repeated_columns

MAX_LOSS_CSV_BYTES = 256 * 1024 * 1024  # loss curves are thousands of rows, not millions
MAX_FIT_ERROR = 0.12  # mean relative error: the paper's worst loss prediction error is 11.7%
MIN_ROWS = 8
# Sane ranges of a loss curve's values (beyond them the least squares overflow): a billion parameter updates,
# the batch and worker limits of the other spot commands, and the planner's largest target loss.
LIMITS = {"iteration": 1e9, "batch": 2**20, "workers": 10_000, "loss": 1e6}

_COLUMNS = {
    "iteration": ("iteration", "iterations", "iter", "step", "j"),
    "loss": ("loss", "train_loss", "training_loss"),
    "batch": ("batch_size", "batch", "b", "batch_per_worker"),
    "workers": ("workers", "n", "num_workers", "world_size"),
    "R": ("r", "convergence"),
}


@dataclass(frozen=True)
class LossCurves:
    """Loss observations, one entry per row."""

    batch: np.ndarray
    workers: np.ndarray
    iteration: np.ndarray
    loss: np.ndarray
    r: np.ndarray


@dataclass(frozen=True)
class LossFit:
    g: tuple[float, float, float, float, float]
    mean_rel_error: float  # mean |predicted - observed| / observed
    max_rel_error: float
    rmse: float
    rows: int
    batches: tuple[int, ...]
    worker_counts: tuple[int, ...]

    @property
    def acceptable(self) -> bool:
        return self.mean_rel_error <= MAX_FIT_ERROR

    def as_dict(self) -> dict:
        return {
            "mean_rel_error": self.mean_rel_error, "max_rel_error": self.max_rel_error, "rmse": self.rmse,
            "rows": self.rows, "batches": list(self.batches), "workers": list(self.worker_counts),
            "bound": MAX_FIT_ERROR,
        }  # fmt: skip


def like_workers_r(workers: np.ndarray) -> np.ndarray:
    """Eq. 5 for n workers of equal speed: sqrt((n - 1) / n)."""
    n = np.asarray(workers, dtype=float)
    return np.sqrt((n - 1) / n)


def curves(batch, workers, iteration, loss, r=None) -> LossCurves:
    """LossCurves from sequences, checked: positive batches and workers, iterations >= 0, finite losses."""
    arrays = [np.asarray(v, dtype=float) for v in (batch, workers, iteration, loss)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
        raise UsageError("loss curves: batch, workers, iteration and loss must be equally long lists")
    b, n, j, y = arrays
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise UsageError("loss curves: every value must be a finite number")
    # a batch of 0.5 would be taken as int(0.5) = 0 by the fit: whole, as the workers
    whole = np.all(b == np.round(b)) and np.all(n == np.round(n))
    if not whole or np.any(b < 1) or np.any(n < 1) or np.any(j < 0) or np.any(y <= 0):
        raise UsageError(
            "loss curves: whole batch >= 1, whole workers >= 1, iteration >= 0 and loss > 0 in every row"
        )
    for name, values in zip(("batch", "workers", "iteration", "loss"), arrays, strict=True):
        if np.any(values > LIMITS[name]):
            raise UsageError(
                f"loss curves: {name} up to {LIMITS[name]:,.0f} (got {float(np.max(values)):.4g}); "
                f"the limits: {', '.join(f'{key} <= {top:,.0f}' for key, top in LIMITS.items())}"
            )
    rr = like_workers_r(n) if r is None else np.asarray(r, dtype=float)
    if rr.shape != b.shape or not np.all(np.isfinite(rr)) or np.any(rr < 0) or np.any(rr > 10):
        raise UsageError("loss curves: R must be a number from 0 to 10 in every row (eq. 5 gives 0 to 1.4)")
    return LossCurves(b, n, j, y, rr)


def read_loss_csv(path: Path) -> LossCurves:
    """Loss curves from a CSV with a header: iteration, loss, batch_size, workers (and optionally R)."""
    text = read_user_text(path, "loss curves", MAX_LOSS_CSV_BYTES)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        numbered = [(reader.line_num, row) for row in reader]  # a file's line numbers, blank lines counted
    except csv.Error as exc:
        raise UsageError(f"loss curves {path} is not a readable CSV: {exc}") from None
    refuse_repeated_columns(reader.fieldnames, f"loss curves {path}", fold_case=True)
    if not numbered:
        raise UsageError(f"loss curves {path}: no rows (a header with iteration, loss, batch_size, workers)")
    header = {name.strip().lower(): name for name in reader.fieldnames}
    found = {}
    for key, names in _COLUMNS.items():
        matches = [header[name] for name in names if name in header]
        if len(matches) > 1:
            raise UsageError(f"loss curves {path}: columns {', '.join(matches)} all name the {key}; keep one")
        match = matches[0] if matches else None
        if match is None and key != "R":
            raise UsageError(f"loss curves {path}: no {key} column (one of: {', '.join(names)})")
        found[key] = match
    values: dict[str, list[float]] = {key: [] for key in found if found[key] is not None}
    for line, row in numbered:
        fields = sum(value is not None for name, value in row.items() if name is not None)
        fields += len(row.get(None) or ())  # those past the header's
        if fields != len(reader.fieldnames):
            raise UsageError(f"loss curves {path} line {line} has {fields} fields where the header has "
                             f"{len(reader.fieldnames)}")  # fmt: skip
        for key in values:
            if not row[found[key]].strip():
                raise UsageError(f"loss curves {path} line {line}: {key} is empty")
            try:
                value = float(row[found[key]])
            except (TypeError, ValueError):
                raise UsageError(
                    f"loss curves {path} line {line}: {key} {row[found[key]]!r} is not a number"
                ) from None
            if key in ("batch", "workers") and math.isfinite(value) and value != round(value):
                raise UsageError(
                    f"loss curves {path} line {line}: {key} {row[found[key]]!r} is not a whole number"
                )
            values[key].append(value)
    return curves(values["batch"], values["workers"], values["iteration"], values["loss"], values.get("R"))


# A fitted loss that rises less than this share of the loss above its floor anywhere on the curves is flat.
FLAT_SHARE = 1e-6


def predict(g, data: LossCurves) -> np.ndarray:
    g1, g2, g3, g4, g5 = g
    return (g2 * data.batch + g3) * np.sqrt((data.r + g4) * data.workers) / (data.iteration + g1) + g5


def fit_loss(data: LossCurves) -> LossFit:
    """g1..g5 by least squares (see the module's doc), with the fit's error."""
    if data.loss.size < MIN_ROWS:
        raise UsageError(f"loss curves: {data.loss.size} rows; at least {MIN_ROWS} are needed")
    batches = tuple(sorted({int(b) for b in data.batch}))
    counts = tuple(sorted({int(n) for n in data.workers}))
    if len(batches) < 2 or len(counts) < 2:
        raise UsageError(
            f"loss curves: need at least two batch sizes and two worker counts to tell g2 from g3 and "
            f"g4 from the rest (got batches {list(batches)}, workers {list(counts)})"
        )
    with np.errstate(all="ignore"):  # a step that overflows is refused by its error, not printed
        g = _grid_start(data)
        g = _levenberg_marquardt(g, data)
        predicted = predict(g, data)
        relative = np.abs(predicted - data.loss) / data.loss
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(relative))):
        raise UsageError("loss curves: the fit of g1..g5 does not converge to finite values on these curves")
    return LossFit(
        g=tuple(float(v) for v in g),  # type: ignore[arg-type]
        mean_rel_error=float(np.mean(relative)),
        max_rel_error=float(np.max(relative)),
        rmse=float(np.sqrt(np.mean((predicted - data.loss) ** 2))),
        rows=int(data.loss.size),
        batches=batches,
        worker_counts=counts,
    )


def flat_fit_reason(fit: LossFit, data: LossCurves) -> str | None:
    """Why a fit matches its curves but the planner cannot use it, or None: a loss scale (model.loss_scale)
    that is not positive at a batch of the curves, or a fitted loss that rises above its floor g5 by less
    than FLAT_SHARE of the loss anywhere (flat curves are matched exactly by such a fit)."""
    g = np.array(fit.g)
    for batch in fit.batches:
        scale = loss_scale(batch, fit.g)
        if not scale > 0:
            return f"the fit gives g2 x batch + g3 = {scale:.3g} at batch {batch}; it must be positive"
    above_floor = float(np.max(predict(g, data) - g[4]))
    if not above_floor > FLAT_SHARE * float(np.max(np.abs(data.loss))):
        return f"the fitted loss stays at its floor g5 = {g[4]:.6g}"
    return None


def _linear_part(g1: float, g4: float, data: LossCurves) -> tuple[np.ndarray, float]:
    scale = np.sqrt((data.r + g4) * data.workers) / (data.iteration + g1)
    design = np.column_stack([data.batch * scale, scale, np.ones_like(scale)])
    coef, *_ = np.linalg.lstsq(design, data.loss, rcond=None)
    residual = design @ coef - data.loss
    return coef, float(residual @ residual)


def _grid_start(data: LossCurves) -> np.ndarray:
    j_top = max(float(np.max(data.iteration)), 1.0)
    g1_grid = np.concatenate([[1e-6 * j_top], np.geomspace(1e-3 * j_top, 10 * j_top, 30)])
    g4_grid = np.geomspace(1e-3, 1e3, 25)
    best = (math.inf, None)
    for g1 in g1_grid:
        for g4 in g4_grid:
            coef, sse = _linear_part(g1, g4, data)
            if sse < best[0]:
                best = (sse, np.array([g1, coef[0], coef[1], g4, coef[2]]))
    if best[1] is None:
        raise UsageError("loss curves: no start for the fit of g1..g5 gives a finite error on these curves")
    return best[1]


def _jacobian(g: np.ndarray, data: LossCurves) -> np.ndarray:
    g1, g2, g3, g4, _ = g
    s = np.sqrt((data.r + g4) * data.workers)
    d = data.iteration + g1
    a = g2 * data.batch + g3
    return np.column_stack(
        [-a * s / d**2, data.batch * s / d, s / d, a * data.workers / (2 * s * d), np.ones_like(s)]
    )


def _in_domain(g: np.ndarray, data: LossCurves) -> bool:
    return bool(np.min(data.iteration) + g[0] > 0 and np.min(data.r) + g[3] > 0)


def _levenberg_marquardt(g: np.ndarray, data: LossCurves, steps: int = 200) -> np.ndarray:
    residual = predict(g, data) - data.loss
    sse = float(residual @ residual)
    damping = 1e-3
    for _ in range(steps):
        jac = _jacobian(g, data)
        normal = jac.T @ jac
        gradient = jac.T @ residual
        diagonal = np.diag(np.maximum(np.diag(normal), 1e-12))
        try:
            step = np.linalg.solve(normal + damping * diagonal, -gradient)
        except np.linalg.LinAlgError:
            damping *= 10
            continue
        trial = g + step
        if _in_domain(trial, data):
            trial_residual = predict(trial, data) - data.loss
            trial_sse = float(trial_residual @ trial_residual)
            if trial_sse < sse:
                converged = sse - trial_sse <= 1e-15 * max(sse, 1e-300) or np.all(
                    np.abs(step) <= 1e-12 * (np.abs(g) + 1e-12)
                )
                g, residual, sse = trial, trial_residual, trial_sse
                damping = max(damping / 10, 1e-12)
                if converged:
                    break
                continue
        damping *= 10
        if damping > 1e12:
            break
    return g
