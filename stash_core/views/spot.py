"""Spot: a spotDNN plan from a workload (uploaded, or the paper's public figures), the on-demand plan beside
it, the window search, fragility, and the revocation simulation - as frames for the page."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.api.decisions import plan_spot
from stash_core.catalog import list_instances
from stash_core.errors import UsageError
from stash_core.spot import PlanResult
from stash_core.spot.fragility import fragile_text  # noqa: F401  (the page words a fragile plan with it)
from stash_core.spot.inputs import (
    MAX_WORKLOAD_BYTES,
    build_offers,
    load_workload,
    on_demand_offers,
    priced_offers,
    ps_bandwidth_Bps,
)
from stash_core.spot.planner import searched_workers
from stash_core.spot.simulate import PlanRisk, simulate, simulation_notes
from stash_core.userfiles import parse_json

EXAMPLE_NAME = "spotDNN paper workload (public figures)"
GBPS = 1e9 / 8  # bytes per second in one Gbit/s
MAX_PAGE_RUNS = 2000  # keeps a page's simulation to seconds

# ResNet-110 as spotDNN publishes it (Shang et al., IWQoS 2023; the public code icloud-ecnu/spotDNN,
# profiler/instanceinfo.py): S_parm 11.54 MB and B_req 142 MB/s (Table IV), PS 1.2 GB/s and PCIe 10 GB/s,
# a1 = 0.8, b1 = -1.92, g1 = 876.5, g2 = -0.2, g5 = 0.5, and 512 images per GPU at 1018 images/s on a
# g3.8xlarge and 1995 on a g3.16xlarge. The public fit has no g4 and no R term: g4 = 1 here, and g3 is the
# one value not published, chosen so that Table I's plan takes its 2,549 s.
_PAPER = {"param_mb": 11.54, "solo_bandwidth_mbps": 142.0, "ps_bandwidth_mbps": 1200.0, "pcie_gbps": 80.0,
          "a1": 0.8, "b1": -1.92, "g": [876.5, -0.2, 1903.6, 1.0, 0.5], "batch_per_gpu": 512}  # fmt: skip
_PAPER_IMAGES_PER_S = {"g3.8xlarge": (2, 1018.0), "g3.16xlarge": (4, 1995.0)}  # (GPUs, measured speed)
EXAMPLE_OFFERS = (("g3.8xlarge", 5), ("g3.16xlarge", 3))  # Table I's plan, at most
EXAMPLE_TARGET = (0.8, 2600.0)  # Table I: target loss 0.8 within 2,600 s


def example_workload() -> dict[str, Any]:
    """The paper's workload as a workload file: T_comp = measured iteration - push and pull alone with the
    PS - the PCIe aggregation (eqs. 6-7 solved for T_comp)."""
    doc = {key: value for key, value in _PAPER.items() if key != "pcie_gbps"}
    param_B = _PAPER["param_mb"] * 1e6
    network_s = 2 * param_B / (_PAPER["solo_bandwidth_mbps"] * 1e6)
    pcie_Bps = _PAPER["pcie_gbps"] * GBPS
    doc["compute_s"] = {
        name: round(gpus * _PAPER["batch_per_gpu"] / speed - network_s - 2 * gpus * param_B / pcie_Bps, 4)
        for name, (gpus, speed) in _PAPER_IMAGES_PER_S.items()
    }
    doc["source"] = "spotDNN (IWQoS 2023) Tables I, III, IV and its public profile; g3, g4 chosen (see Stash)"
    return doc


def example_workload_text() -> str:
    return json.dumps(example_workload(), indent=2)


def gpu_instances(db_path: Path | str) -> pd.DataFrame:
    """Catalog instances with accelerators (spotDNN plans GPU workers): name, GPUs, spot and on-demand $/h."""
    frame = list_instances(db_path)
    frame = frame[frame["accelerator_count"].fillna(0) >= 1]
    columns = ["name", "accelerator", "accelerator_count", "spot_usd_per_h", "on_demand_usd_per_h"]
    return frame[columns].reset_index(drop=True)


def workload_text(data: bytes, name: str) -> str:
    """An uploaded workload file's text; UsageError when it is not a .json file of UTF-8 text, or too large,
    named."""
    suffix = Path(name).suffix.lower()
    if suffix != ".json":  # as the Upload page refuses another type: the file named, and why
        raise UsageError(f"{name}: unsupported file type {suffix or '(none)'}; a workload file is .json")
    if len(data) > MAX_WORKLOAD_BYTES:
        said = f"{name} is {len(data):,} bytes; at most {MAX_WORKLOAD_BYTES:,} are read"
        raise UsageError(f"{said} (a workload file is a few hundred bytes)")
    try:
        return data.decode("utf-8-sig")  # a byte-order mark, as `stash spot` reads the file
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not a text file (a workload file is JSON)") from None


def workload_names(text: str) -> list[str]:
    """Instance types the workload gives a compute time for (the page offers them first)."""
    doc = _parse(text)
    compute = doc.get("compute_s")
    return [str(name) for name in compute] if isinstance(compute, dict) else []


def compute_source_words(text: str) -> str | None:
    """Where the plan takes its compute times from, said where the workload has none of its own (else None).
    Plain text: the model's name is the file's."""
    doc = _parse(text)
    if isinstance(doc.get("compute_s"), dict) and doc["compute_s"]:
        return None
    none = 'The workload gives no compute times ("compute_s"'
    if doc.get("model"):
        return (f"{none}): each instance type chosen takes its time from a completed profile of "
                f"{doc['model']} on it in this database.")  # fmt: skip
    return (f"{none}, seconds per iteration on each instance type) and no \"model\" whose stored profiles "
            "would give them: add one of the two to the file to plan.")  # fmt: skip


@dataclass
class SpotAnswer:
    """What the page shows: the spot plan, the on-demand plan, the window search and fragility."""

    spot: PlanResult
    on_demand: PlanResult | None
    candidates: pd.DataFrame  # the spot plan's top rows (plan_table)
    windows: pd.DataFrame  # per worker count n: windows tried, within budget, cheapest, fastest
    points: pd.DataFrame  # every window evaluated: time, cost, n, within budget
    fragile: list[str] = field(default_factory=list)
    ps_gbps: float = 0.0
    on_demand_reason: str | None = None
    risk: PlanRisk | None = None  # the spot plan at the default revocation rate
    searched: str = ""  # the worker counts searched, as the page says them
    notes: list[str] = field(default_factory=list)  # types offered left out of a plan for want of a price


# What each fitted coefficient of the workload's model is (spot/model.py), for a fragility warning that
# would otherwise read "g3 +5%" like the name of an instance.
def plan(db_path: Path | str, text: str, offers: tuple[tuple[str, int], ...], target_loss: float,
         budget_s: float, pcie_gbps: float = 80.0, revocation_s: float = 0.0) -> SpotAnswer:  # fmt: skip
    """The cheapest spot cluster for the workload `text` (JSON), and the cheapest on-demand one beside it.
    UsageError (with a readable message) on a bad workload, offer or target."""
    _, doc = _workload(text)  # its faults said of the text, before the file the planner reads is written
    quotas = dict(_offers(offers))
    with tempfile.TemporaryDirectory(prefix="stash-spot-") as folder:
        path = Path(folder) / "workload.json"
        path.write_text(text)
        options = {"pcie_gbps": pcie_gbps, "revocation_s": revocation_s, "top": 10, "db": db_path}
        spot = plan_spot(path, quotas, target_loss, budget_s, **options)
        on_demand, reason, notes = None, None, list(spot.notes)
        try:
            never_revoked = {**options, "revocation_s": 0.0}
            planned = plan_spot(path, quotas, target_loss, budget_s, on_demand=True, **never_revoked)
            on_demand = planned.plan
            notes += [note for note in planned.notes if note not in notes]  # eq. 10's is both plans' note
        except UsageError as exc:  # e.g. no on-demand price in the catalog: the spot plan still stands
            reason = str(exc)
    return SpotAnswer(spot=spot.plan, on_demand=on_demand, candidates=candidates_frame(spot.candidates),
                      windows=window_search(spot.plan), points=window_points(spot.plan), fragile=spot.fragile,
                      ps_gbps=ps_bandwidth_Bps(None, doc) / GBPS, on_demand_reason=reason,
                      risk=None if spot.risk is None else PlanRisk(**spot.risk),
                      searched=searched_workers(spot.plan), notes=notes)  # fmt: skip


def candidates_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The plan's candidates (plan_table rows); a cluster outside the loss model has no time, iterations or
    cost (inf in the plan): blank cells, `outside_loss_model` saying why, never "inf" shown as a figure."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    floats = frame.select_dtypes("float").columns
    frame[floats] = frame[floats].where(frame[floats].map(math.isfinite))
    return frame


def window_points(result: PlanResult) -> pd.DataFrame:
    """Every window the planner evaluated (clusters repeat when windows cover identical instances)."""
    rows = [{"cluster": p.label(), "workers": p.workers, "training_s": p.training_s, "cost_usd": p.cost_usd,
             "within_budget": p.meets_budget}
            for p in result.candidates if math.isfinite(p.training_s)]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["cluster", "workers", "training_s", "cost_usd", "within_budget"])
    return frame.drop_duplicates("cluster").reset_index(drop=True)


def window_search(result: PlanResult) -> pd.DataFrame:
    """Per worker count searched: windows tried, how many met the budget, the cheapest of those and the
    fastest window. The counts are those of the candidates (one pass over them): eq. 15's upper bound can be
    beyond any quota (spot.model.MAX_WORKER_BOUND where the parameter server hardly saturates)."""
    by_workers: dict[int, list] = {}
    for p in result.candidates:
        by_workers.setdefault(p.workers, []).append(p)
    rows = []
    for n, tried in sorted(by_workers.items()):
        inside = [p for p in tried if p.meets_budget]
        cheapest = min(inside, key=lambda p: p.cost_usd) if inside else None
        fastest = min(tried, key=lambda p: p.training_s)
        fastest_s = fastest.training_s if math.isfinite(fastest.training_s) else None
        rows.append({"workers": n, "windows": len(tried), "within_budget": len(inside),
                     "cheapest": cheapest.label() if cheapest else "none within the deadline",
                     "cheapest_usd": cheapest.cost_usd if cheapest else None,
                     "fastest": fastest.label() if fastest_s is not None else "none: outside the loss model",
                     "fastest_s": fastest_s})  # fmt: skip
    return pd.DataFrame(rows, columns=["workers", "windows", "within_budget", "cheapest", "cheapest_usd",
                                       "fastest", "fastest_s"])  # fmt: skip


def simulation(db_path: Path | str, text: str, offers: tuple[tuple[str, int], ...], target_loss: float,
               deadline_s: float, rate_per_h: float, runs: int, revocation_s: float = 30.0,
               pcie_gbps: float = 80.0, seed: int = 1,
               plan_overhead_s: float = 0.0) -> pd.DataFrame:  # fmt: skip
    """Per strategy (spotDNN, no contention, on-demand): probability of meeting the deadline, mean and p90
    time, mean cost and revocations, over `runs` Monte Carlo runs at `rate_per_h` per spot instance."""
    if not 1 <= runs <= MAX_PAGE_RUNS:
        raise UsageError(f"simulate 1 to {MAX_PAGE_RUNS:,} runs on this page (stash spot-simulate for more)")
    workload, doc = _workload(text)
    offers_list = _offers(offers)
    # a type without a spot price is left out, as the plan leaves it (refused where no type has one)
    spot_offers, _, no_spot_note = priced_offers(Path(db_path), offers_list, doc, "spot")
    spot_offers = spot_offers or build_offers(Path(db_path), offers_list, doc, "spot")
    on_demand, _, unpriced_note = on_demand_offers(Path(db_path), offers_list, doc)
    rows = simulate(spot_offers, on_demand, workload, target_loss, deadline_s,
                    ps_bandwidth_Bps(None, doc), pcie_gbps * GBPS, rate_per_h=rate_per_h,
                    revocation_s=revocation_s, runs=runs, seed=seed,
                    plan_overhead_s=plan_overhead_s)  # fmt: skip
    frame = pd.DataFrame(rows).drop(columns="infeasible_reason")  # a note says it, above the table
    # the share's 95% interval over the runs, beside it (21.01% of 695 runs claimed two decimals)
    ranges = [None if ci is None else f"{ci[0]:.0%} to {ci[1]:.0%}" for ci in frame.pop("p_deadline_ci95")]
    frame.insert(frame.columns.get_loc("p_deadline") + 1, "p_deadline_range", ranges)
    # no plan in time, the work limit, trainings never finished, instances without an on-demand price
    frame.attrs["notes"] = simulation_notes(rows) + [note for note in (no_spot_note, unpriced_note) if note]
    return frame


def _parse(text: str) -> dict[str, Any]:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_WORKLOAD_BYTES:  # said here: the planner reads a temporary file, not named by the user
        raise UsageError(f"the workload is {size:,} bytes; at most {MAX_WORKLOAD_BYTES:,} are read")
    doc = parse_json(text, "the workload")  # the file's checks: nesting, numbers too long (in our words)
    if not isinstance(doc, dict):
        raise UsageError("the workload must be a JSON object with the fields of a workload file")
    return doc


def _workload(text: str) -> tuple[Any, dict[str, Any]]:
    """load_workload's checks on the text (it reads a file; the text is written to a temporary one)."""
    _parse(text)
    with tempfile.TemporaryDirectory(prefix="stash-spot-") as folder:
        path = Path(folder) / "workload.json"
        path.write_text(text)
        try:
            return load_workload(path)
        except (ValueError, TypeError, RecursionError) as exc:
            raise UsageError(f"workload: {exc}") from None


def _offers(offers: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    chosen = [(str(name), int(quota)) for name, quota in offers if int(quota) > 0]
    if not chosen:
        raise UsageError("choose at least one instance type with a quota of 1 or more")
    return chosen
