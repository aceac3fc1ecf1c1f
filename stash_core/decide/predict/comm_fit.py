"""What the communication model was fitted to and how far off it is on sources it never saw.

bench/comm_report.py (also run from bench/cross_instance.py) checks the all-reduce model against published
multi-GPU training figures (comm_validation.py: published_multi_gpu.csv and the later sets, each looked at
before the model was last changed, so fitted) and writes comm_summary.json: the contention and jitter factors
fitted on every source (ddp_overlap.CommParams), and the stated communication error, per scope (one machine,
several machines): a percentile of the held-out errors of the step time when each source's figures were
predicted with the factors fitted on the others, chosen so that a job never seen (a source's model, its
codebase) is covered 80% of the time (comm_stated.py); on one machine, an interconnect class whose own
held-out errors run wider states its own.
Predictions read the file; without it the factors are the prior (0, 0) and the error is unstated.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from stash_core.decide.predict.ddp_overlap import CommParams

COMM_SUMMARY_JSON = Path(__file__).resolve().parent / "comm_summary.json"
SCOPES = ("one machine", "several machines")
# The published multi-GPU sets the factors are fitted to, in order (comm_validation.FITTED_CSVS); the later
# ones were each collected as a test set and evaluated once before they were fitted.
FITTED_SET_NAMES = (
    "published_multi_gpu.csv", "published_multi_gpu_holdout.csv", "published_multi_gpu_final.csv",
    "published_multi_gpu_fresh.csv", "published_multi_gpu_fresh2.csv", "published_multi_gpu_fresh3.csv",
)  # fmt: skip


@functools.cache
def load_comm_summary(path: Path = COMM_SUMMARY_JSON) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def comm_data_digest() -> str:
    """Of the figures the summary was made from: the bandwidth table and the multi-GPU training figures."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("collective_bandwidth.csv", *FITTED_SET_NAMES):
        path = here / name
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()[:16]


def comm_summary_is_stale() -> bool:
    summary = load_comm_summary()
    return summary is not None and summary.get("data_digest") != comm_data_digest()


def fitted_comm_params() -> CommParams:
    fitted = (load_comm_summary() or {}).get("params") or {}
    values = {
        name: float(fitted[name])
        for name in ("contention", "jitter")
        if isinstance(fitted.get(name), int | float)
    }
    return CommParams(**values)


def comm_stated_error(nodes: int, link_class: str | None = None) -> tuple[float | None, bool, str]:
    """(the held-out error of the step time of a multi-GPU prediction, a fraction; whether enough held-out
    figures of its scope stand behind it; a note when its interconnect class's own, wider, is stated)."""
    summary = load_comm_summary() or {}
    scope = SCOPES[1] if nodes > 1 else SCOPES[0]
    value = (summary.get("stated_error") or {}).get(scope)
    validated = bool((summary.get("validated") or {}).get(scope))
    error = float(value) if isinstance(value, int | float) else None
    own = (summary.get("stated_error_by_class") or {}).get(link_class or "")
    # a class's own error, taken on one machine, bounds it across machines too: more links, no fewer misses
    if error is not None and isinstance(own, int | float) and own > error:
        return float(own), validated, f"wider for {link_class}: from its own held-out figures on one machine"
    return error, validated, ""


def write_comm_summary(summary: dict, path: Path = COMM_SUMMARY_JSON) -> None:
    from stash_core.userfiles import write_atomic

    write_atomic(path, json.dumps(summary, indent=1, sort_keys=True) + "\n", "summary")
    load_comm_summary.cache_clear()
