"""A probe set as rows of the `probes` table: one row per measured figure."""

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


def _measure(entry: dict) -> dict:
    return {
        "size_bytes": entry.get("size_bytes"),
        "repetitions": entry.get("repetitions"),
        "time_s": entry.get("time_s"),
        "time_min_s": entry.get("time_min_s"),
        "algbw_gbps": entry.get("algbw_gbps"),
        "busbw_gbps": entry.get("busbw_gbps"),
    }
