"""Column headings in words, with their units: `mean_s` reads "mean (s)", `ci95_s` "± 95% (s)",
`usd_per_h` "USD per hour". Every table a page shows gets its headings from column_label (pages/_shared.py
show_table), so that no stored column name reaches a user raw; a name already in words is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Names whose words the rule below would not find.
NAMED = {
    "ci95_s": "± 95% (s)",
    "run_label": "run",
    "run_id": "run id",
    "started_at": "started",
    "finished_at": "finished",
    "ingested_at": "stored",
    "created_at": "created",
    "usd_per_h": "USD per hour",
    "training_usd": "cost (USD)",
    "cost_usd": "cost (USD)",
    "price_usd_per_h": "USD per hour",
    "resident_fraction_start": "resident at start",
    "workers_per_node": "workers per node",
    "batch_size": "batch",
    "rank_skew_s": "rank skew (s)",
    "unattributed_s": "not separated (s)",
    "unattributed_ci95_s": "not separated ± 95% (s)",
    "unattributed_share": "not separated (share)",
    "wall_s": "wall time (s)",
    "t_s": "time (s)",
    "jct_s": "JCT (s)",
    "accelerator_count": "accelerators",
    "vcpus": "vCPUs",
    "on_demand_usd_per_h": "on-demand (USD/h)",
    "spot_usd_per_h": "spot (USD/h)",
}
# A name's last word, when it is a unit: what the heading says in brackets.
UNITS = {
    "s": "s", "ms": "ms", "us": "µs", "h": "h", "min": "min", "usd": "USD", "bytes": "bytes", "mb": "MB",
    "gb": "GB", "gib": "GiB", "mib": "MiB", "gbps": "Gb/s", "mbps": "MB/s", "pct": "%", "share": "share",
    "w": "W", "c": "°C",
}  # fmt: skip
WORDS = {
    "ci95": "± 95%", "cpu": "CPU", "gpu": "GPU", "gpus": "GPUs", "jct": "JCT", "usd": "USD", "pcie": "PCIe",
    "avg": "average", "util": "use", "comm": "communication", "num": "number of", "vcpus": "vCPUs",
    "id": "id", "nvlink": "NVLink", "ps": "PS",
}  # fmt: skip


def column_label(name: Any) -> str:
    """A column's heading: its name in words, the unit its last word names in brackets ("iteration_ci95_s"
    -> "iteration ± 95% (s)", "compute_share" -> "compute (share)"); a name with a space or a capital, or
    not text, as it is."""
    text = str(name)
    if text in NAMED:
        return NAMED[text]
    if not text or " " in text or text != text.lower() or "_" not in text and text not in UNITS:
        return text
    words = [word for word in text.split("_") if word]
    unit = UNITS.get(words[-1]) if len(words) > 1 else None
    if unit is not None:
        words = words[:-1]
    heading = " ".join(WORDS.get(word, word) for word in words)
    return f"{heading} ({unit})" if unit else heading


def labelled_config(columns: Iterable[Any], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Streamlit column_config for a table's columns: each column's heading from column_label unless the
    given config already names one (a config of None, which hides a column, is kept)."""
    result: dict[str, Any] = dict(config or {})
    for column in columns:
        key = str(column)
        given = result.get(key, ...)
        if given is ...:
            result[key] = {"label": column_label(column)}
        elif isinstance(given, Mapping) and not given.get("label"):
            result[key] = {**given, "label": column_label(column)}
    return result


def with_labels(frame: Any) -> Any:
    """A frame whose columns are renamed to their headings (for a static table, which has no column
    config)."""
    return frame.rename(columns={column: column_label(column) for column in frame.columns})
