"""Stash: where does the time of a distributed training iteration go, and what should you rent?

The facade both the CLI and the pages may call, one name per step of the flow
spec -> launch -> measure -> result file -> store -> decisions:

    from stash_core import ProfileSpec, prepare_data, run_profile   # measure (engine/)
    from stash_core import write_result_atomic, load_result        # the result file (results/)
    from stash_core import ingest_files, breakdown_frame, list_runs # the database (store/)
    from stash_core import fit_stall_models, recommend, whatif     # decisions (decide/)

Names resolve on first use, so `import stash_core` stays cheap (no torch, no DuckDB) for the worker
processes and the command line. The map of the package is docs/architecture.md.
"""

from __future__ import annotations

import importlib
from pathlib import Path as _Path
from typing import Any

__version__ = "0.1.0"

# The folder that holds the stash_core package: put on PYTHONPATH of every worker and helper process.
PACKAGE_PARENT = str(_Path(__file__).resolve().parent.parent)

_FACADE = {
    "ProfileSpec": "stash_core.spec",
    "prepare_data": "stash_core.engine.data_setup",
    "run_profile": "stash_core.engine.profiler",
    "write_result_atomic": "stash_core.results",
    "load_result": "stash_core.results",
    "ingest_files": "stash_core.store",
    "ingest_result": "stash_core.store",
    "list_runs": "stash_core.store",
    "breakdown_frame": "stash_core.store",
    "query_readonly": "stash_core.store",
    "fit_stall_models": "stash_core.decide.fit",
    "predict_stall": "stash_core.decide.fit",
    "recommend": "stash_core.decide.recommend",
    "whatif": "stash_core.decide.whatif",
}

__all__ = ["PACKAGE_PARENT", "__version__", *_FACADE]


def __getattr__(name: str) -> Any:
    module = _FACADE.get(name)
    if module is None:
        raise AttributeError(f"module 'stash_core' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
