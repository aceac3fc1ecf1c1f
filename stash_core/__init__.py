"""Stash: where does the time of a distributed training iteration go, and what should you rent?

The flow is spec -> launch -> measure -> result file -> store -> decisions; the CLI (cli/) and the pages
(views/) call the module that owns each step, the Python API (api/) the same. The map of the package is
docs/architecture.md.

    import stash_core as stash
    stash.profile(model="resnet10", batch_size=8, input_shape=(3, 32, 32), max_phase_seconds=4).to_frame()

The API's names (profile, predict, runs, ...; docs/api.md) load on first use: `import stash_core` stays
cheap (no torch, pandas or DuckDB) for the worker processes and the command line.
"""

from __future__ import annotations

import importlib as _importlib
from pathlib import Path as _Path
from typing import Any as _Any

__version__ = "0.2.0"

# The folder that holds the stash_core package: put on PYTHONPATH of every worker and helper process.
PACKAGE_PARENT = str(_Path(__file__).resolve().parent.parent)
# PYTHONSAFEPATH of the workers (launch/runner.py): torchrun starts them with `python -m`, which would put the
# current folder first on sys.path, where a json.py would shadow the standard one. This value rather than "1"
# tells a script's worker that Stash set it, so it drops it before the user's script runs (script_entry.py).
SAFE_PATH_VALUE = "stash"

# The Python API (stash_core/api/) and the errors it raises, each imported when first used.
_API = (
    "profile", "profile_script", "predict", "recommend", "plan_spot", "simulate_schedule", "runs",
    "breakdown", "load_result", "Result", "Predictions", "Recommendation", "SpotPlan", "Schedule",
    "ProfileSpec",
)  # fmt: skip
_ERRORS = ("StashError", "UsageError", "MeasurementError", "SaveError")


def __getattr__(name: str) -> _Any:
    # By name, not an import statement: every layer imports this package (PACKAGE_PARENT, __version__), and
    # the API sits near the top of them (.importlinter); nothing is loaded until a name is asked for.
    if name in _API:
        module = "stash_core.api"
    elif name in _ERRORS:
        module = "stash_core.errors"
    else:
        raise AttributeError(f"module 'stash_core' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, *_ERRORS})  # a name once used is in globals() too: listed once


__all__ = ["PACKAGE_PARENT", "SAFE_PATH_VALUE", "__version__", *_API, *_ERRORS]
