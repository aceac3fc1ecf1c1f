"""The error a prediction prints, taken from held-out validation of its path and batch regime.

bench/cross_instance.py runs the held-out checks (validation.py) over the published figures (published_
throughputs.csv and the pooled PyTorch rows of the later sources, published.load_pool) and writes
validation_summary.json: the step model's parameters fitted on every figure, and per path a percentile of the
held-out absolute errors, overall and per batch regime (a regime with fewer than MIN_FIGURES held-out figures
takes its path's), with the dies that had held-out figures. Scaled and script state the 80th percentile.
Roofline states the percentile at which a source never seen is covered 80% of the time (source_level): each
source's held-out figures checked against the error stated from the other sources' alone, the sources'
coverage averaged with each source counted once, and the figures of the sources collected after the model's
form was chosen covered 80% of the time one by one too; an 80th percentile over figures covers a source far
from the others (another framework, a GeForce card, a training loop of its own) much less often than 80%,
since the many figures of sources like the rest carry it. Roofline's rows: leave one source out and leave
one GPU out together; scaled and script (GPU ratio, gpu_ratio.py): pairs within one software stack (what a
user's own profile and its target share). A GPU die whose own held-out errors run wider (at least MIN_FIGURES
of them, their percentile above its regime's) prints its own and says so: a path's
percentile covers most figures, not those of a GPU the model misses (an L4, a B200). A GPU with no held-out
figure gets its regime's error times UNVALIDATED_FACTOR and says "unvalidated". Predictions read the file
instead of refitting, so they take milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.catalog.accelerators import ACCELERATORS_CSV
from stash_core.decide.predict.gpu_ratio import DEFAULT_SHARE
from stash_core.decide.predict.published import (
    LATER_CSVS,
    PUBLISHED_CSV,
    REGIMES,
    chip,
    later_sources,
    regime,
)
from stash_core.decide.predict.roofline import StepParams

SUMMARY_JSON = Path(__file__).resolve().parent / "validation_summary.json"
STATED_QUANTILE = 0.8
MIN_FIGURES = 5
LEVELS = tuple(round(0.80 + 0.01 * step, 2) for step in range(16))  # the percentiles source_level tries
UNVALIDATED_FACTOR = 1.5  # a GPU never checked: wider than any validated one (a judgement, not a fit)


@dataclass(frozen=True)
class StatedError:
    error: float | None  # a fraction of the predicted throughput
    validated: bool
    regime: str
    note: str = ""


def data_digest(csv_path: Path = PUBLISHED_CSV) -> str:
    """Of the figures (the published ones and the later sets pooled with them) and of the accelerator table
    they are predicted with: any changing makes the summary stale."""
    digest = hashlib.sha256(csv_path.read_bytes())
    for path in LATER_CSVS:
        digest.update(path.read_bytes())
    digest.update(ACCELERATORS_CSV.read_bytes())
    return digest.hexdigest()[:16]


def quantile(errors: pd.Series | list[float], level: float = STATED_QUANTILE) -> float | None:
    values = np.asarray(list(errors), dtype=float)
    # "higher": an error that is a held-out figure's, so that at least `level` of them are within it
    return float(np.quantile(values, level, method="higher")) if len(values) else None


def stated_table(frame: pd.DataFrame, level: float = STATED_QUANTILE) -> dict[str, float | None]:
    table: dict[str, float | None] = (
        {"all": quantile(frame["abs_error"], level)} if len(frame) else {"all": None}
    )
    for name in REGIMES:
        errors = frame.loc[frame["regime"] == name, "abs_error"] if len(frame) else []
        table[name] = quantile(errors, level) if len(errors) >= MIN_FIGURES else table["all"]
    return table


def stated_frames(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The held-out rows each path's stated error comes from: a profile and its target share the user's
    software stack, so scaled and script take the pairs within one stack (where there are any)."""
    chosen = dict(frames)
    for path in ("scaled", "script"):
        frame = frames.get(path)
        if frame is not None and (frame["held_out"] == "within").any():
            chosen[path] = frame[frame["held_out"] == "within"]
    return chosen


def die_table(frame: pd.DataFrame, level: float = STATED_QUANTILE) -> dict[str, float]:
    """Each GPU die's own 80th percentile (or `level`'s) of held-out errors, where it has at least MIN_FIGURES
    of them."""
    if not len(frame):
        return {}
    grouped = frame.groupby("gpu")["abs_error"]
    return {gpu: quantile(errors, level) for gpu, errors in grouped if len(errors) >= MIN_FIGURES}


def coverage(
    frame: pd.DataFrame, table: dict[str, float | None], dies: dict[str, float] | None = None
) -> float | None:
    """Share of the held-out figures whose absolute error is within the error stated for them (their regime's,
    or their die's where that is wider)."""
    if not len(frame):
        return None
    stated = frame["regime"].map(lambda name: table.get(name) or table["all"])
    widened = frame["gpu"].map(lambda gpu: (dies or {}).get(gpu, 0.0))
    return float((frame["abs_error"] <= np.maximum(stated, widened) + 1e-12).mean())


def coverage_by_source(frame: pd.DataFrame, level: float = STATED_QUANTILE) -> pd.DataFrame:
    """How often the stated error holds for a source never seen: each source's leave-one-source-out figures
    against the error stated from every other source's held-out figures alone (their regime's percentile at
    `level`, or their die's where wider; frame: the roofline path's rows, leave one source out and leave one
    GPU out). One row per source and regime ("all" first): figures and the share covered."""
    rows = []
    for source in sorted(set(frame["source_id"])):
        others = frame[frame["source_id"] != source]
        table, dies = stated_table(others, level), die_table(others, level)
        own = frame[(frame["source_id"] == source) & (frame["held_out"] == "source")]
        for name, members in [("all", own), *own.groupby("regime")]:
            rows.append(
                {"source_id": source, "regime": name, "figures": len(members),
                 "covered": coverage(members, table, dies)}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["source_id", "regime", "figures", "covered"])


def source_level(frame: pd.DataFrame, later: frozenset[str] = frozenset()) -> float:
    """The percentile the roofline path states, so that a source never seen is covered STATED_QUANTILE of the
    time: the lowest of LEVELS at which the sources' coverage (coverage_by_source, each source counted once,
    whatever its number of figures) averages at least STATED_QUANTILE, and at which the `later` sources'
    figures (published.later_sources: collected after the step model's form was chosen on the first ones)
    are covered as often, counted one by one. The first sources' held-out errors are narrower than a new
    source's, since the form was chosen looking at them; the later ones', some sources of many figures, are
    what a user's job is most like. The highest of LEVELS if none does."""
    for level in LEVELS:
        by_source = coverage_by_source(frame, level)
        every = by_source[(by_source["regime"] == "all") & by_source["covered"].notna()]
        if not len(every) or not every["covered"].mean() >= STATED_QUANTILE:
            continue  # no held-out evidence, or too little covered: a higher level
        fresh = every[every["source_id"].isin(later)]
        if len(fresh) and figure_share(fresh) < STATED_QUANTILE:
            continue
        return level
    return LEVELS[-1]


def figure_share(by_source: pd.DataFrame) -> float:
    """The share of figures covered, over coverage_by_source's rows (each source weighed by its figures; 0
    without a figure)."""
    figures = by_source["figures"].sum()
    return float((by_source["covered"] * by_source["figures"]).sum() / figures) if figures else 0.0


def stated_without(source: str, path: str = "roofline") -> tuple[dict[str, float | None], dict[str, float]]:
    """The stated error per regime and per die as the shipped summary's held-out figures give it with every
    figure of one source left out: what a figure of that source is checked against when it is held out."""
    summary = load_summary() or {}
    rows = (summary.get("held_out") or {}).get(path) or []
    sources = (summary.get("held_out_source") or {}).get(path) or [""] * len(rows)
    frame = pd.DataFrame(rows, columns=["regime", "gpu", "abs_error"])
    if len(frame):
        frame = frame[[name != source for name in sources]]
    level = float((summary.get("stated_quantile") or {}).get(path, STATED_QUANTILE))
    return stated_table(frame, level), die_table(frame, level)


def build_summary(
    frames: dict[str, pd.DataFrame],
    params: StepParams,
    figures: int,
    skipped: list[str],
    script_share: float = DEFAULT_SHARE,
    ratio_params: StepParams | None = None,
) -> dict:
    chosen = stated_frames(frames)
    levels = {path: STATED_QUANTILE for path in chosen}
    if len(chosen.get("roofline", [])):
        levels["roofline"] = source_level(chosen["roofline"], later_sources())
    tables = {path: stated_table(frame, levels[path]) for path, frame in chosen.items()}
    dies = {path: die_table(frame, levels[path]) for path, frame in chosen.items()}
    return {
        "stated_quantile": levels,
        "data_sha256": data_digest(),
        "figures": figures,
        "skipped": skipped,
        "params": params.values,
        "fitted_on": params.fitted_on,
        "ratio_params": (ratio_params or params).values,
        "ratio_fitted_on": (ratio_params or params).fitted_on,
        "script_share": script_share,
        "stated_error": tables,
        "stated_error_by_gpu": dies,
        "coverage": {path: coverage(chosen[path], tables[path], dies[path]) for path in chosen},
        "validated_gpus": sorted(set(frames["roofline"]["gpu"])) if len(frames["roofline"]) else [],
        "held_out": {path: chosen[path][["regime", "gpu", "abs_error"]].values.tolist() for path in chosen},
        "held_out_source": {path: chosen[path]["source_id"].tolist() for path in chosen},
    }


def write_summary(summary: dict, path: Path = SUMMARY_JSON) -> None:
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    load_summary.cache_clear()


@functools.cache
def load_summary(path: Path = SUMMARY_JSON) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fitted_params(ratios: bool = False) -> StepParams:
    """The parameters fitted on every published figure (the prior when the summary is missing); with ratios,
    those fitted also to the ratios between GPUs (calibration.py), which the scaled path uses."""
    summary = load_summary()
    key, note = ("ratio_params", "ratio_fitted_on") if ratios else ("params", "fitted_on")
    if not summary or not isinstance(summary.get(key), dict):
        return StepParams()
    return StepParams(dict(summary[key]), str(summary.get(note) or "published figures"))


def fitted_script_share() -> float:
    """gpu_ratio's share for a profiled script, fitted on every published pair (DEFAULT_SHARE without one)."""
    share = (load_summary() or {}).get("script_share")
    return float(share) if isinstance(share, (int, float)) and 0.0 <= share <= 1.0 else DEFAULT_SHARE


def is_stale() -> bool:
    summary = load_summary()
    return summary is None or summary.get("data_sha256") != data_digest()


def stated_error(path: str, batch_size: int | None, accelerator_name: str | None) -> StatedError:
    """The error to print for a prediction by `path` at this batch on this GPU."""
    name = regime(batch_size) if batch_size else "all"
    summary = load_summary() or {}
    table = (summary.get("stated_error") or {}).get(path) or {}
    error = table.get(name) or table.get("all")
    die = chip(str(accelerator_name)) if accelerator_name else ""
    validated = bool(die) and die in (summary.get("validated_gpus") or [])
    if error is None:
        return StatedError(None, False, name, "no held-out validation of this path")
    if not validated:
        note = "unvalidated: no published figure of this GPU was held out; stated error widened"
        return StatedError(error * UNVALIDATED_FACTOR, False, name, note)
    own = ((summary.get("stated_error_by_gpu") or {}).get(path) or {}).get(die)
    if own is not None and own > error:
        return StatedError(own, True, name, f"wider for {die}: from its own held-out figures")
    return StatedError(error, True, name)


def expected_errors() -> dict[str, float | None]:
    """Each path's stated error over all batch regimes."""
    tables = (load_summary() or {}).get("stated_error") or {}
    return {path: (tables.get(path) or {}).get("all") for path in ("roofline", "scaled", "script")}


def expected_error(path: str, model: str | None = None) -> float | None:
    """A path's stated error over all regimes (`model` kept for callers; the error is per path and regime)."""
    return expected_errors().get(path)
