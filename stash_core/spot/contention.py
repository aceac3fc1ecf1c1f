"""spotDNN's workload profiling, the fitting half: a1, b1 of eq. 9 and the workload file's network part.

Eq. 9, P(n) = min(a1 sqrt(n) + b1, 1), is fitted by least squares to the observed bottleneck shares of the
runs with two or more workers (one worker alone never waits for another). Its error: the root mean square
and largest residual in P, and how far eq. 8 with the fitted P and the observed PS bandwidth lands from
each measured per-worker bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stash_core.errors import UsageError
from stash_core.store.reads import latest_compute_s
from stash_core.zoo_names import canonical_model

MB = 1e6


@dataclass
class ContentionFit:
    a1: float
    b1: float
    rms_error: float  # of P
    max_error: float
    points: list[tuple[int, float]]  # (workers, observed P)

    def predict(self, workers: int) -> float:
        return min(max(self.a1 * math.sqrt(workers) + self.b1, 0.0), 1.0)

    def as_dict(self) -> dict[str, Any]:
        return {"a1": self.a1, "b1": self.b1, "rms_error": self.rms_error, "max_error": self.max_error,
                "points": [list(p) for p in self.points]}  # fmt: skip


def fit_contention(points: list[tuple[int, float]]) -> ContentionFit:
    """a1, b1 of P = a1 sqrt(n) + b1 from (n, P) with n >= 2; at least two distinct worker counts."""
    used = [(int(n), float(p)) for n, p in points if n >= 2 and math.isfinite(p)]
    if len({n for n, _ in used}) < 2:
        raise UsageError(
            "fitting a1, b1 needs runs with at least two worker counts of 2 or more (spotDNN uses 2, 4, 7)"
        )
    x = np.sqrt([n for n, _ in used])
    y = np.array([p for _, p in used])
    a1, b1 = np.polyfit(x, y, 1)
    residuals = y - (a1 * x + b1)
    return ContentionFit(float(a1), float(b1), float(np.sqrt(np.mean(residuals**2))),
                         float(np.max(np.abs(residuals))), used)  # fmt: skip


def bandwidth_errors(fit: ContentionFit, solo_Bps: float, ps_Bps: float,
                     measured: list[tuple[int, float]]) -> list[dict[str, float]]:  # fmt: skip
    """Eq. 8 with the fitted P against each measured per-worker bandwidth (n, B_wk)."""
    rows = []
    for n, bandwidth in measured:
        fair = ps_Bps / n
        p = fit.predict(n)
        predicted = p * fair + (1 - p) * solo_Bps if solo_Bps > fair else solo_Bps
        rows.append({"workers": n, "measured_mbps": bandwidth / MB, "predicted_mbps": predicted / MB,
                     "rel_error": abs(predicted - bandwidth) / bandwidth})  # fmt: skip
    return rows


def workload_fields(profile: Any, fit: ContentionFit) -> dict[str, Any]:
    """The workload file's fields from a contention profile (spot/workload_profile.ContentionProfile)."""
    solo = next((m for m in profile.counts if m.workers == 1), None)
    if solo is None:
        raise UsageError("B_req needs a run with one worker alone: include 1 in the worker counts")
    if fit.a1 <= 0:
        observed = ", ".join(f"n={n}: {p:.2f}" for n, p in fit.points)
        raise UsageError(
            f"the PS bottleneck does not grow with the workers here (a1 = {fit.a1:.3g}; observed P "
            f"{observed}): eq. 9 cannot describe it; profile a larger model or longer runs"
        )
    ps_Bps = max(m.ps_Bps for m in profile.counts)
    measured = [(m.workers, m.bandwidth_Bps) for m in profile.counts]
    return {
        "model": profile.model,
        "param_bytes": profile.param_bytes,
        "solo_bandwidth_mbps": solo.bandwidth_Bps / MB,
        "a1": fit.a1,
        "b1": fit.b1,
        "ps_bandwidth_mbps": ps_Bps / MB,  # B_ps as measured with B_req: `stash spot` takes it by default
        "batch_per_gpu": profile.batch,
        "contention_fit": {
            **fit.as_dict(),
            "bandwidth": bandwidth_errors(fit, solo.bandwidth_Bps, ps_Bps, measured),
            "ps_mbps": ps_Bps / MB,
            "runs": [m.as_dict() for m in profile.counts],
            "notes": list(profile.notes),
        },
    }


def merged_compute_s(existing: dict[str, Any], model: str, batch_per_gpu: int, found: dict) -> dict:
    """The workload's compute times after a profile of `model` at `batch_per_gpu`: those `found` in stored
    profiles, over the file's own only where the file was of this model at this batch. Another job's would be
    taken as this one's by `stash spot`, where a file's compute times win over stored profiles."""
    same_model = canonical_model(str(existing.get("model"))) == canonical_model(model)  # ResNet18 is resnet18
    same_job = same_model and existing.get("batch_per_gpu") == batch_per_gpu
    return {**((existing.get("compute_s") or {}) if same_job else {}), **found}


def replaced_job_notes(existing: dict[str, Any], model: str, batch_per_gpu: int, kept: dict) -> list[str]:
    """What a profile of `model` at `batch_per_gpu` left out of, or left as it was in, a workload file of
    another job: its compute times (merged_compute_s drops them) and its loss coefficients g (kept: they
    come from the user's own training logs, `stash spot-fit-loss`)."""
    dropped = sorted(set(existing.get("compute_s") or {}) - set(kept))
    same_model = canonical_model(str(existing.get("model"))) == canonical_model(model)
    theirs = existing.get("model") or "a model the file does not name"
    notes = []
    if dropped:
        notes.append(f"compute_s of {', '.join(dropped)} left out: the file's were of {theirs} at batch "
                     f"{existing.get('batch_per_gpu')} per GPU, this profile is of {model} at batch "
                     f"{batch_per_gpu}")  # fmt: skip
    if existing.get("g") and not same_model:
        notes.append(f"g (the loss model) is still the file's, fitted for {theirs}: fit {model}'s with "
                     "`stash spot-fit-loss`")  # fmt: skip
    return notes


def stored_compute_times(db_path: Path, model: str, batch_per_gpu: int,
                         instances: list[tuple[str, int]]) -> tuple[dict[str, float], list[str]]:  # fmt: skip
    """T_comp of each (instance, GPUs) from Stash's stored profiles, and the instances without one."""
    found, missing = {}, []
    for name, gpus in instances:
        seconds = latest_compute_s(db_path, model, name, batch_per_gpu, gpus)
        if seconds is None:
            missing.append(name)
        else:
            found[name] = seconds
    return found, missing
