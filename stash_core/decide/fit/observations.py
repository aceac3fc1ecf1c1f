"""Measured communication stalls and bandwidth probes, read from the store as DataFrames for fitting.

One observation is one completed run's interconnect or network stall (status measured or clamped_zero) with
the counts of its model. The link bandwidth of a multi-node run comes from its spec (emulated cluster
setting), else from an "@1gbit"-style suffix of its instance label (what `stash campaign` writes), else from
the catalog's network Gbps of its instance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.catalog import list_instances
from stash_core.store.impossible_runs import breakdown_marks
from stash_core.store.reads import bandwidth_probes, communication_stalls
from stash_core.units import finite_float, rate_bps

MODELLED_STALLS = ("interconnect", "network")
FEATURES = ("grad_bytes", "grad_tensor_count", "layer_count")
# Interconnect stall is measured on one machine (R1 - R0), so nodes and network bandwidth do not matter.
GROUP_COLUMNS: dict[str, tuple[str, ...]] = {
    "interconnect": ("device", "workers_per_node", "instance"),
    "network": ("device", "workers_per_node", "nodes", "instance", "bandwidth_gbps"),
}
_LABEL_RATE_RE = re.compile(r"^(?P<base>.*?)[@](?P<rate>\d+(?:\.\d+)?\s*[a-z]*)$", re.IGNORECASE)
_SPEC_GBPS_KEYS = ("cluster_bandwidth_gbps", "bandwidth_gbps", "link_gbps", "network_gbps")
_SPEC_RATE_KEYS = ("cluster_bandwidth", "bandwidth", "link_bandwidth")


def parse_rate_gbps(text: Any) -> float | None:
    """'1gbit' -> 1.0, '200mbit' -> 0.2, '10mbps' (10 MB/s) -> 0.08, '25' (Gbit/s) -> 25.0; else None."""
    if text is not None and not isinstance(text, str):
        text = finite_float(text)  # numbers (numpy's too) are Gbit/s
        if text is None:
            return None
    bits_per_s = rate_bps(text, bare_unit="gbit")
    return bits_per_s / 1e9 if bits_per_s is not None else None


def format_gbps(gbps: float | None) -> str:
    gbps = finite_float(gbps)
    if gbps is None:
        return "-"
    gbps = round(gbps, 9)  # 8 / beta / 1e9 comes back as 0.9999999...
    # four figures: a measured rate's six ("8.09093 Gbit/s") claimed a precision no probe has
    if gbps >= 1:
        return f"{gbps:.4g} Gbit/s" if gbps < 1e4 else f"{gbps:.0f} Gbit/s"
    return f"{gbps * 1000:.4g} Mbit/s"


def split_instance_label(label: str | None) -> tuple[str | None, float | None]:
    """'emulated@1gbit' -> ('emulated', 1.0); a label without a rate suffix comes back unchanged; no label
    (None, or the NaN pandas puts in a column where some runs have one) -> (None, None)."""
    if not isinstance(label, str) or not label:
        return None, None
    match = _LABEL_RATE_RE.match(label)
    if match:
        rate = parse_rate_gbps(match.group("rate"))
        if rate is not None:
            return match.group("base"), rate
    return label, None


def spec_bandwidth_gbps(spec: dict[str, Any] | None) -> float | None:
    """The emulated link bandwidth a spec records, under any of the names a launcher may use."""
    if not isinstance(spec, dict):
        return None
    places = [spec] + [spec[key] for key in ("cluster", "network") if isinstance(spec.get(key), dict)]
    for place in places:
        for key in _SPEC_GBPS_KEYS:
            value = parse_rate_gbps(place.get(key))
            if value is not None:
                return value
        for key in _SPEC_RATE_KEYS:
            value = place.get(key)
            if isinstance(value, str):
                parsed = parse_rate_gbps(value)
                if parsed is not None:
                    return parsed
        bandwidth_bps = finite_float(place.get("bandwidth_bps"))
        if bandwidth_bps:
            return bandwidth_bps / 1e9
    return None


def load_observations(db_path: Path | str) -> pd.DataFrame:
    """One row per (completed run, interconnect|network stall) with model counts and configuration.

    Columns: run_id, started_at, stall, stall_s, ci95_s, stall_status, model, batch_size, device, backend,
    workers_per_node, nodes, world_size, instance (label without rate suffix), instance_label (as stored),
    hostname (of rank 0's machine), bandwidth_gbps (network rows only), grad_bytes, grad_tensor_count,
    layer_count.
    """
    frame = communication_stalls(db_path)
    # a breakdown that cannot be (its warning, or shares past 100% stored before the warning existed), as
    # every list of runs marks it
    marks = breakdown_marks(db_path, sorted(set(frame["run_id"]))) if len(frame) else {}
    frame["left_out"] = [
        f"its breakdown is {marks[run]} (`stash show RUN_ID` says why)" if run in marks else why
        for run, why in zip(frame["run_id"], frame["left_out"], strict=True)
    ]
    kept = frame["left_out"].isna()
    said = [f"run {run} left out of the {stall} fit: {why}"
            for run, stall, why in frame.loc[~kept, ["run_id", "stall", "left_out"]].itertuples(index=False)]
    frame = frame[kept]
    if frame.empty:
        empty = _empty_observations()
        empty.attrs["left_out"] = said
        return empty
    catalog = list_instances(db_path).set_index("name")["network_gbps"].to_dict()
    bases, bandwidths = [], []
    # the three columns read, not every column of every row (itertuples took most of the Models page's load)
    columns = (frame[name].tolist() for name in ("instance_label", "stall", "spec_json"))
    for label, stall, spec_json in zip(*columns, strict=True):
        base, label_gbps = split_instance_label(label)
        bases.append(base)
        gbps = None
        if stall == "network":
            gbps = spec_bandwidth_gbps(_json(spec_json)) or label_gbps
            if gbps is None and base in catalog:
                gbps = finite_float(catalog[base])
        bandwidths.append(gbps)
    frame["instance"] = bases
    frame["bandwidth_gbps"] = pd.array(bandwidths, dtype="Float64").astype("float64")
    frame["world_size"] = frame["workers_per_node"] * frame["nodes"].where(frame["stall"] == "network", 1)
    frame = frame.drop(columns=["spec_json"])
    observations = frame[list(_empty_observations().columns)].reset_index(drop=True)
    observations.attrs["left_out"] = said  # runs no fit may use, each with why (the fit says them)
    return observations


def with_dnn(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with a column `dnn`: which network a row is, told by its counts (FEATURES), which are all a fit
    learns from. Two zoo names of one network (shufflenet_v2 and shufflenet_v2_x1_0) are one DNN: held out
    apart they would each be predicted from the other, and count as two where the data holds one."""
    if "dnn" in frame.columns:
        return frame
    if not len(frame):
        return frame.assign(dnn=pd.Series(dtype=object))
    texts = [frame[feature].astype(str) for feature in FEATURES]  # column by column, not row by row
    keys = texts[0]
    for text in texts[1:]:
        keys = keys + "/" + text
    return frame.assign(dnn=keys)


def load_probes(db_path: Path | str) -> pd.DataFrame:
    """The probes table (bandwidth probes), or an empty frame with its columns when there is none yet."""
    return bandwidth_probes(db_path)


def _json(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _empty_observations() -> pd.DataFrame:
    columns = {
        "run_id": "object", "started_at": "object", "stall": "object", "stall_s": "float64",
        "ci95_s": "float64", "stall_status": "object", "model": "object", "batch_size": "Int64",
        "device": "object", "backend": "object", "workers_per_node": "Int64", "nodes": "Int64",
        "world_size": "Int64", "instance": "object", "instance_label": "object", "hostname": "object",
        "bandwidth_gbps": "float64",
        "grad_bytes": "float64", "grad_tensor_count": "float64", "layer_count": "float64",
    }  # fmt: skip
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})
