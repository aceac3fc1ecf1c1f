"""The published single-GPU training figures (published_throughputs.csv) as measured steps, and how the
validation groups them: by source (software stack), by chip (variants of one GPU die left out together) and
by batch regime. Rows that cannot be used (a GPU not in the accelerator table, a model not in the zoo, a
malformed number) are counted with the reason, never fatal: the file grows faster than the tables."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.calibration import Point, arrays_for
from stash_core.decide.predict.features import STEP_EXTRAS

PUBLISHED_CSV = Path(__file__).resolve().parent / "published_throughputs.csv"
# Four sources collected after the model was fitted and evaluated once as shipped
# (docs/single-gpu-holdout.md); their PyTorch rows have since been pooled with the published figures:
# fitted on, and each held out in turn.
HOLDOUT_CSV = Path(__file__).resolve().parent / "published_single_gpu_holdout.csv"
# Five sets collected after the step model's last change and before any prediction for them, each evaluated
# once as shipped (docs/single-gpu-fresh.md to docs/single-gpu-fresh5.md), then pooled like the holdout.
FRESH_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh.csv"
FRESH2_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh2.csv"
FRESH3_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh3.csv"
FRESH4_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh4.csv"
FRESH5_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh5.csv"
# Two sets collected without any prediction for them and looked at by no choice, each evaluated once as
# shipped (docs/single-gpu-fresh6.md, -fresh7.md), then pooled like the others.
FRESH6_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh6.csv"
FRESH7_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh7.csv"
# The later sets whose PyTorch rows load_pool adds to published_throughputs.csv, in the order collected.
LATER_CSVS = (HOLDOUT_CSV, FRESH_CSV, FRESH2_CSV, FRESH3_CSV, FRESH4_CSV, FRESH5_CSV, FRESH6_CSV, FRESH7_CSV)
# PyTorch sources of those sets whose timed loop reads real ImageNet through a CPU loader
# (docs/single-gpu-fresh.md): their figures time the loader, which the step model does not predict, so they
# are reported beside the pool and never fitted.
INPUT_BOUND_SOURCES = frozenset({"gavel-throughputs", "elasticflow-a100"})
# Collected after the sixth and seventh sets were pooled, without any prediction for it
# (docs/single-gpu-fresh8.md): no fit or choice uses it.
FRESH8_CSV = Path(__file__).resolve().parent / "published_single_gpu_fresh8.csv"
# every set no fit or choice has used yet, in the order collected
UNTOUCHED_CSVS = (FRESH8_CSV,)
# Batch regimes of the reported errors: small batches are launch- and dispatch-bound, large ones not.
SMALL_BATCH_MAX, MEDIUM_BATCH_MAX = 16, 64
REGIMES = ("small", "medium", "large")
# GPU names that are one die: left out together, so that a variant never predicts its twin.
_DIES = {"H100": "GH100", "H200": "GH100", "GH200": "GH100", "A10": "GA102", "A10G": "GA102", "A40": "GA102",
         "A6000": "GA102", "3090": "GA102", "L40": "AD102", "L40S": "AD102", "4090": "AD102"}  # fmt: skip


@dataclass
class Published:
    points: list[Point] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "row N (what): why"


def regime(batch_size: int) -> str:
    if batch_size <= SMALL_BATCH_MAX:
        return "small"
    return "medium" if batch_size <= MEDIUM_BATCH_MAX else "large"


def chip(accelerator_name: str) -> str:
    """The GPU die of an accelerator name: "NVIDIA H100 PCIe 80 GB" and "NVIDIA H200" are both GH100."""
    found = find_accelerator(accelerator_name)
    text = (found.name if found else accelerator_name).upper()
    text = re.sub(r"^(NVIDIA|TESLA|AMD)\s+|(GEFORCE|RTX)\s+", "", text).strip()
    model = re.split(r"[\s\-_]", text)[0] if text else accelerator_name
    return _DIES.get(model, model)


def framework(measured: str) -> str:
    """The framework of a figure: the first word of its 'measured' column ("PyTorch", "TensorFlow", ...)."""
    return (measured.split(",")[0].split(" ") or ["?"])[0] or "?"


def load_pool(count: bool = True) -> Published:
    """The figures the step model is fitted and validated on: every usable row of published_throughputs.csv
    and the pooled rows of the later sets (LATER_CSVS, is_pooled). Stash predicts PyTorch jobs: the later
    sets' other frameworks are reported beside them, never fitted."""
    published = load_published(PUBLISHED_CSV, count)
    points, skipped = list(published.points), list(published.skipped)
    for path in LATER_CSVS:
        later = load_published(path, count)
        points += [point for point in later.points if is_pooled(point)]
        skipped += later.skipped
    return Published(points, skipped)


def later_sources() -> frozenset[str]:
    """The sources of the later sets (LATER_CSVS): collected after the step model's form was chosen."""
    sources: set[str] = set()
    for path in LATER_CSVS:
        with open(path, encoding="utf-8", newline="") as handle:
            sources |= {row["source_id"] for row in csv.DictReader(handle)}
    return frozenset(sources)


def is_pooled(point: Point) -> bool:
    """Whether a later set's figure is fitted on: a PyTorch figure whose timed loop waits on no CPU loader."""
    return framework(point.measured) == "PyTorch" and point.source_id not in INPUT_BOUND_SOURCES


def load_published(csv_path: Path | str = PUBLISHED_CSV, count: bool = True) -> Published:
    """Every usable single-GPU row as a Point, and a reason for each row left out. count=False only checks
    that the model is in the zoo, without counting its step (which takes seconds per model and shape)."""
    with open(csv_path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    result = Published()
    for number, row in enumerate(rows, start=2):
        what = f"row {number} ({row.get('model')}, {row.get('accelerator')}, batch {row.get('batch_size')})"
        try:
            if int(row.get("gpus") or 1) != 1:
                continue  # a multi-GPU figure includes communication
            point = _point(row)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            result.skipped.append(f"{what}: malformed ({exc})")
            continue
        if find_accelerator(point.accelerator) is None:
            result.skipped.append(f"{what}: accelerator not in the accelerator table")
            continue
        try:
            if count:
                arrays_for(point)
            elif point.model not in _zoo_models():
                raise ValueError(f"unknown model {point.model!r}")
        except Exception as exc:  # noqa: BLE001 - a model the zoo cannot build here is counted, not fatal
            result.skipped.append(f"{what}: model not countable ({str(exc).splitlines()[0][:80]})")
            continue
        result.points.append(point)
    return result


def _point(row: dict[str, str]) -> Point:
    batch = int(row["batch_size"])
    samples_per_s = float(row["samples_per_s"])
    if batch <= 0 or samples_per_s <= 0:
        raise ValueError("batch and throughput must be positive")
    shape = tuple(int(size) for size in (row.get("input_shape") or "").split("x") if size.strip())
    source = row.get("source") or ""
    source_id = (row.get("source_id") or "").strip() or source.split(" ")[0]
    return Point(
        row["model"].strip(), batch, row["accelerator"].strip(), row["precision"].strip(),
        batch / samples_per_s, source, shape, source_id, (row.get("revision") or "").strip(),
        (row.get("table") or "").strip(), (row.get("measured") or "").strip(),
        _choice(row, "memory_format", ("", "nchw", "nhwc")), _choice(row, "optimizer", ("", "none", "loop")),
        _choice(row, "attention", ("", "fused", "decomposed")), _extras(row),
    )  # fmt: skip


def _choice(row: dict[str, str], column: str, allowed: tuple[str, ...]) -> str:
    value = (row.get(column) or "").strip().lower()
    if value not in allowed:
        named = ", ".join(v for v in allowed if v)
        raise ValueError(f"{column} must be one of {named} or empty, got {value!r}")
    return value


def _extras(row: dict[str, str]) -> str:
    """The step_extras column: STEP_EXTRAS joined by "+", in the file's order, or empty."""
    value = (row.get("step_extras") or "").strip().lower()
    unknown = [extra for extra in value.split("+") if extra and extra not in STEP_EXTRAS]
    if unknown:
        named = ", ".join(STEP_EXTRAS)
        raise ValueError(f"step_extras must be {named} joined by '+' or empty, got {value!r}")
    return value


def _zoo_models() -> list[str]:
    from stash_core.zoo import list_models  # torch: only when the published figures are read

    return list_models()
