"""The communication model checked against published data-parallel training figures, held out by source.

Each row of published_multi_gpu.csv (and of the later sets, fitted alike: FITTED_CSVS) gives a source's
throughput on n GPUs and on one GPU (same table, model,
precision and batch per GPU). The one-GPU figure is the compute (its step time, batch / samples per second),
so the check is of communication alone: the predicted step on n GPUs is that step plus what DDP adds over the
row's links (network.added_s), and the predicted scaling efficiency is one-GPU step / n-GPU step. The
published efficiency is throughput_n / (n x throughput_1).

Rows the all-reduce model does not describe are left out and counted: a parameter server instead of an
all-reduce (tf_cnn_benchmarks' parameter_server), gradient accumulation whose steps per all-reduce the row
does not give, a GPU or a link class with no figure. Repeats of one configuration in one source (the same
GPU, model, precision, batch and GPU count on several hosts) count once, at their median. The contention and
jitter factors (ddp_overlap.CommParams) are the two values fitted here, on a grid, to the least mean absolute
efficiency error: leave one source out fits them on the other sources and predicts the left-out one.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.collectives import Fabric, family_of, intra_curve, network_curve, subset_share
from stash_core.decide.predict.comm_fit import FITTED_SET_NAMES, SCOPES, comm_data_digest
from stash_core.decide.predict.comm_stated import (
    MIN_FIGURES,
    PYTORCH,
    class_errors,
    coverage,
    coverage_by_codebase,
    stated_errors,
)
from stash_core.decide.predict.ddp_overlap import CommParams, ddp_overlap
from stash_core.decide.predict.roofline import compute_time
from stash_core.decide.predict.stated_error import fitted_params
from stash_core.decide.predict.step_cost import step_cost

MULTI_GPU_CSV = Path(__file__).with_name("published_multi_gpu.csv")
HOLDOUT_CSV = Path(__file__).with_name("published_multi_gpu_holdout.csv")
# Each collected as a test set and evaluated once, then fitted like the others (docs/multi-gpu-final.md,
# docs/multi-gpu-fresh.md, docs/multi-gpu-fresh2.md, docs/multi-gpu-fresh3.md say what each showed before).
FINAL_CSV = Path(__file__).with_name("published_multi_gpu_final.csv")
FRESH_CSV = Path(__file__).with_name("published_multi_gpu_fresh.csv")
FRESH2_CSV = Path(__file__).with_name("published_multi_gpu_fresh2.csv")
FRESH3_CSV = Path(__file__).with_name("published_multi_gpu_fresh3.csv")
FITTED_CSVS = tuple(Path(__file__).with_name(name) for name in FITTED_SET_NAMES)  # one list: comm_fit.py
# Figures collected before any prediction for them and in no fit: each evaluated once, on the model as it then
# stood (docs/multi-gpu-fresh4.md to -fresh9.md), and shown by bench/comm_report.py since.
TEST_CSVS = tuple(Path(__file__).with_name(f"published_multi_gpu_fresh{n}.csv") for n in (4, 5, 6, 7, 8, 9))
NIC_GBPS = {"edr": 100.0, "hdr": 200.0, "ndr": 400.0}
CONTENTION_GRID = np.arange(0.0, 3.0001, 0.1)
JITTER_GRID = np.arange(0.0, 0.080001, 0.0025)
KEY = ("source_id", "accelerator", "model", "input_shape", "precision", "batch_size", "gpus", "nodes", "intra_node",
       "inter_node", "measured")  # fmt: skip
COLUMNS = [
    "source_id", "framework", "model", "accelerator", "precision", "batch_size", "gpus", "nodes", "intra_node",
    "inter_node", "link_class", "step_1_s", "comm_s", "published_efficiency", "predicted_efficiency",
    "error_points", "step_error",
]  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One published multi-GPU figure, ready to predict: its links, gradient bytes and one-GPU step."""

    row: dict
    links: Fabric
    grad_bytes: float
    step_1_s: float
    backward_s: float
    memory_gbs: float

    @property
    def published_efficiency(self) -> float:
        return float(self.row["samples_per_s"]) / (
            int(self.row["gpus"]) * float(self.row["samples_per_s_1gpu"])
        )


def load_figures(path: Path = MULTI_GPU_CSV) -> list[dict]:
    """The figures of a CSV, each configuration of a source once (the median of its repeats)."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(name, "") for name in KEY), []).append(row)
    merged = []
    for group in groups.values():
        efficiency = [
            float(r["samples_per_s"]) / (int(r["gpus"]) * float(r["samples_per_s_1gpu"])) for r in group
        ]
        middle = sorted(zip(efficiency, range(len(group)), strict=True))[len(group) // 2][1]
        merged.append({**group[middle], "repeats": str(len(group))})
    return merged


def skip_reason(row: dict) -> str | None:
    """Why the all-reduce model does not describe a row (None when it does)."""
    measured = row.get("measured", "").lower()
    if "parameter_server" in measured or "parameter server" in measured:
        return "parameter server"
    if "replicated without nccl" in measured:
        return "no NCCL all-reduce"
    if "accumulat" in measured.replace("no gradient accumulation", ""):
        return "gradient accumulation (all-reduces per micro-batch not given or varying)"
    return None


def network_of(inter_node: str) -> tuple[str, float] | None:
    """(family, line rate GB/s per node) of a row's "infiniband_hdr x8" or "ethernet_10g x1"."""
    match = re.fullmatch(r"\s*([a-z]+)_([a-z0-9]+)\s+x(\d+)\s*", inter_node or "")
    if not match:
        return None
    kind, speed, nics = match.groups()
    gbps = NIC_GBPS.get(speed) or (
        float(speed[:-1]) if speed.endswith("g") and speed[:-1].isdigit() else None
    )
    family = family_of(kind)
    return (family, int(nics) * gbps / 8.0) if family and gbps else None


# Aliases of intra-machine classes that are the same links: 4 V100 SXM2 joined pairwise by NVLink 2 are one
# fully connected quad of the cube mesh; 4 A100 SXM4 joined pairwise by 4 NVLink 3 links each give every GPU its
# 12 links (300 GB/s out), as the NVSwitch board does, and NCCL's rings over a full mesh use them all (a judgement:
# no published all-reduce figure of the 4-GPU board was found).
CLASS_ALIASES = {"nvlink2_mesh4": "nvlink2_cubemesh", "nvlink3_mesh4": "nvswitch_a100"}
# A model outside the zoo: its parameter count from the row ("params=N" in `measured`), backward taken as
# twice the forward (the share the script path uses).
OTHER_MODEL_BACKWARD_SHARE = 2.0 / 3.0


@functools.cache
def _step_shares(model: str, batch_size: int, shape: tuple[int, ...], accelerator: str, precision: str):
    """(trained parameter count, backward share of the one-GPU step) from the step model."""
    cost = step_cost(model, batch_size, shape or None)
    gpu = find_accelerator(accelerator)
    assert gpu is not None
    compute = compute_time(cost, gpu, precision, fitted_params())
    share = compute.backward_s / max(compute.forward_s + compute.backward_s + compute.optimizer_s, 1e-12)
    return cost.trained_count, share


def build_case(row: dict, exclude_source: str | None = None) -> Case | str:
    """The Case of a row, or why it cannot be predicted; `exclude_source`: bandwidth figures of that source
    left out (none of the collective sources is a training source, so normally None)."""
    reason = skip_reason(row)
    if reason:
        return reason
    gpu = find_accelerator(row["accelerator"])
    if gpu is None:
        return "GPU not in the accelerator table"
    gpus, nodes = int(row["gpus"]), int(row.get("nodes") or 1)
    per_node = gpus // nodes
    klass = CLASS_ALIASES.get(row["intra_node"], row["intra_node"])
    if per_node > 1 and not row["intra_node"]:
        return "no class for the GPUs' links inside a machine"
    intra = intra_curve(klass, exclude_source) if per_node > 1 else None
    if per_node > 1 and intra is None:
        return f"no all-reduce figure for {row['intra_node']}"
    if intra is not None:
        intra = intra.scaled(subset_share(row["intra_node"], per_node))
    network, line_gbs = None, 0.0
    if nodes > 1:
        found = network_of(row.get("inter_node", ""))
        network = network_curve(found[0], exclude_source) if found else None
        if network is None or found is None:
            return f"no all-reduce figure for {row.get('inter_node')}"
        line_gbs = found[1]
    sizes = model_sizes(row, gpu.name)
    if isinstance(sizes, str):
        return sizes
    params, share = sizes
    step_1_s = int(row["batch_size"]) / float(row["samples_per_s_1gpu"])
    if "tokens/s" in row.get("measured", ""):  # a throughput of tokens: a step is batch x sequence tokens
        step_1_s *= float(row.get("input_shape") or "nan")
    if not math.isfinite(step_1_s):
        return "a token throughput without its sequence length"
    links = Fabric(
        intra, network, line_gbs, per_node, nodes, f"{row['intra_node']} {row.get('inter_node', '')}"
    )
    return Case(row, links, 4.0 * params, step_1_s, step_1_s * share, gpu.memory_gbs)


def components(case: Case) -> tuple[float, float, float]:
    """(seconds added whatever the factors, seconds per unit of contention, seconds per unit of jitter): the
    added time is linear in the two factors."""
    ranks = case.links.gpus_per_node * case.links.nodes
    unit = ddp_overlap(case.grad_bytes, case.step_1_s, case.backward_s, case.links.allreduce_s, ranks,
                       CommParams(1.0, 1.0), case.memory_gbs)  # fmt: skip
    return unit.exposed_s + unit.copies_s, unit.slowdown_s, unit.straggler_s


def model_sizes(row: dict, accelerator: str) -> tuple[int, float] | str:
    """(parameters, backward share of the step) of a row's model: the zoo's from the step model, another
    model's from its "params=N"; or why there are none."""
    from stash_core.zoo.registry import ZOO

    if row["model"] not in ZOO:
        found = re.search(r"params=(\d+)", row.get("measured", ""))
        if not found:
            return "a model outside the zoo without its parameter count"
        return int(found.group(1)), OTHER_MODEL_BACKWARD_SHARE
    shape = tuple(int(size) for size in str(row.get("input_shape") or "").split("x") if size.strip())
    try:
        return _step_shares(row["model"], int(row["batch_size"]), shape, accelerator, row["precision"])
    except Exception as error:  # a shape or batch the zoo refuses
        return f"step model: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


def predict_case(case: Case, params: CommParams) -> dict:
    fixed, per_contention, per_jitter = components(case)
    comm_s = fixed + params.contention * per_contention + params.jitter * per_jitter
    predicted = case.step_1_s / (case.step_1_s + comm_s)
    published = case.published_efficiency
    row = case.row
    link_class = CLASS_ALIASES.get(row["intra_node"], row["intra_node"])
    return {
        "source_id": row["source_id"], "framework": row.get("framework", ""), "model": row["model"],
        "accelerator": row["accelerator"], "precision": row["precision"], "batch_size": int(row["batch_size"]),
        "gpus": int(row["gpus"]), "nodes": int(row.get("nodes") or 1), "intra_node": row["intra_node"],
        "inter_node": row.get("inter_node", ""), "link_class": link_class, "step_1_s": case.step_1_s,
        "comm_s": comm_s,
        "published_efficiency": published, "predicted_efficiency": predicted,
        "error_points": 100.0 * (predicted - published), "step_error": published / predicted - 1.0,
    }  # fmt: skip


def cases(rows: list[dict]) -> tuple[list[Case], dict[str, int]]:
    """The predictable rows as Cases, and how many rows were left out for each reason."""
    built, skipped = [], {}
    for row in rows:
        case = build_case(row)
        if isinstance(case, str):
            skipped[case] = skipped.get(case, 0) + 1
        else:
            built.append(case)
    return built, skipped


def source_weights(train: list[Case]) -> np.ndarray:
    """Each figure's weight in the loss, so that every source weighs alike whatever its number of figures
    (1 / (sources x its figures)): Lambda's 327 figures do not set the factors for every other stack."""
    sources = [case.row["source_id"] for case in train]
    counts = {source: sources.count(source) for source in set(sources)}
    return np.array([1.0 / (len(counts) * counts[source]) for source in sources])


def fit_params(train: list[Case]) -> CommParams:
    """The (contention, jitter) on the grid with the least mean absolute efficiency error over `train`, each
    source weighing alike."""
    if not train:
        return CommParams()
    parts = np.array([components(case) for case in train])  # rows x (fixed, contention, jitter)
    step = np.array([case.step_1_s for case in train])
    published = np.array([case.published_efficiency for case in train])
    added = (parts[:, 0][None, None, :] + CONTENTION_GRID[:, None, None] * parts[:, 1][None, None, :]
             + JITTER_GRID[None, :, None] * parts[:, 2][None, None, :])  # fmt: skip
    loss = (np.abs(step / (step + added) - published) * source_weights(train)).sum(axis=2)
    best_contention, best_jitter = np.unravel_index(np.argmin(loss), loss.shape)
    return CommParams(
        round(float(CONTENTION_GRID[best_contention]), 4), round(float(JITTER_GRID[best_jitter]), 4)
    )


def leave_one_source_out(
    built: list[Case], fit_sources: set[str]
) -> tuple[pd.DataFrame, dict[str, CommParams]]:
    """Each source's rows predicted with the factors fitted on the other `fit_sources`; the factors used for
    each source."""
    rows, factors = [], {}
    for source in sorted({case.row["source_id"] for case in built}):
        train = [
            case for case in built if case.row["source_id"] != source and case.row["source_id"] in fit_sources
        ]
        factors[source] = fit_params(train)
        rows += [predict_case(case, factors[source]) for case in built if case.row["source_id"] == source]
    return pd.DataFrame(rows, columns=COLUMNS), factors


def summary_table(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean error and mean absolute error in efficiency points, share predicted too high, per group."""
    if frame.empty:
        return pd.DataFrame()
    grouped = frame.groupby(by)
    return pd.DataFrame({
        "figures": grouped.size(),
        "published": grouped["published_efficiency"].mean(),
        "predicted": grouped["predicted_efficiency"].mean(),
        "mean_error_pts": grouped["error_points"].mean(),
        "mae_pts": grouped["error_points"].apply(lambda errors: float(np.mean(np.abs(errors)))),
        "optimistic": grouped["error_points"].apply(lambda errors: float(np.mean(errors > 0))),
    }).reset_index()  # fmt: skip


def fitted_figures() -> list[dict]:
    """The figures the factors are fitted to and the stated error is taken from: every published set but the
    test set (the later ones were looked at before the model's last change, so they count as fitted)."""
    return [figure for path in FITTED_CSVS for figure in load_figures(path)]


def build_comm_summary(figures: list[dict]) -> tuple[dict, pd.DataFrame, dict[str, int]]:
    """(comm_summary.json's content, the held-out frame, rows left out by reason) over `figures`: the
    factors fitted on every PyTorch source, the held-out errors with each source left out in turn."""
    built, skipped = cases(figures)
    pytorch_sources = {case.row["source_id"] for case in built if case.row.get("framework") == PYTORCH}
    frame, factors = leave_one_source_out(built, pytorch_sources)
    params = fit_params([case for case in built if case.row["source_id"] in pytorch_sources])
    stated, counts, level = stated_errors(frame)
    by_class = class_errors(frame, level, stated)
    by_codebase = coverage_by_codebase(frame, level)
    summary = {
        "params": {"contention": params.contention, "jitter": params.jitter},
        "fitted_on": sorted(pytorch_sources),
        "fitted_sets": [path.name for path in FITTED_CSVS],
        "held_out_params": {source: vars(value) for source, value in factors.items()},
        "stated_error": stated,
        "stated_from_figures": counts,
        "fitted_figures": len([case for case in built if case.row["source_id"] in pytorch_sources]),
        "stated_percentile": level,
        "stated_error_by_class": by_class,
        "codebase_coverage": dict(zip(by_codebase["codebase"], by_codebase["covered"].round(4), strict=True)),
        "validated": {scope: counts[scope] >= MIN_FIGURES for scope in SCOPES},
        "coverage": coverage(frame[frame["framework"] == PYTORCH], stated),
        "figures": len(built),
        "left_out": skipped,
        "data_digest": comm_data_digest(),
    }
    return summary, frame, skipped
