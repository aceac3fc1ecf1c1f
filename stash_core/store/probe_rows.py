"""A probe set as rows of the `probes` table (one row per measured figure), and back (an export's rows as
the probe sets of a run's result file)."""

from __future__ import annotations


def probe_rows(probe: dict, instance: str | None = None, link_gbps: float | None = None) -> list[dict]:
    """One row per measured figure of a probe set, with the columns of the `probes` table."""
    common = {
        "probe_id": probe.get("probe_id"),
        "run_id": probe.get("run_id"),
        "phase": probe.get("phase"),
        "started_at": probe.get("started_at"),
        "hostname": probe.get("hostname"),
        "instance": instance if instance is not None else probe.get("instance"),
        "backend": probe.get("backend"),
        "device": probe.get("device"),
        "world_size": probe.get("world_size"),
        "nodes": probe.get("nodes"),
        "workers_per_node": probe.get("workers_per_node"),
        "link_gbps": link_gbps if link_gbps is not None else probe.get("link_gbps"),
    }
    rows = []
    for entry in probe.get("allreduce") or []:
        rows.append({**common, "kind": "allreduce", "scope": "all", **_measure(entry)})
    gradient = probe.get("gradient_allreduce")
    if gradient:
        rows.append({**common, "kind": "gradient_allreduce", "scope": "all", **_measure(gradient)})
    for entry in probe.get("p2p") or []:
        rows.append({**common, "kind": "p2p", "scope": entry.get("scope"), **_measure(entry)})
    return rows


# What one measured figure holds, and what its probe set says of every figure (the rows' other columns)
MEASURE_FIELDS = ("size_bytes", "repetitions", "time_s", "time_min_s", "algbw_gbps", "busbw_gbps")
SET_FIELDS = ("probe_id", "phase", "started_at", "hostname", "instance", "backend", "device", "world_size",
              "nodes", "workers_per_node", "link_gbps")  # fmt: skip


def _measure(entry: dict) -> dict:
    return {key: entry.get(key) for key in MEASURE_FIELDS}


def probe_sets(rows: list[dict]) -> list[dict]:
    """The probe sets of rows of the `probes` table (probe_rows' inverse), in the order of their first row."""
    sets: dict = {}
    for row in rows:
        probe = sets.setdefault(
            row.get("probe_id"), {key: row.get(key) for key in SET_FIELDS} | {"allreduce": [], "p2p": []}
        )
        measure = _measure(row)
        if row.get("kind") == "gradient_allreduce":
            probe["gradient_allreduce"] = measure
        elif row.get("kind") == "p2p":
            probe["p2p"].append({**measure, "scope": row.get("scope")})
        else:
            probe["allreduce"].append(measure)
    return list(sets.values())
