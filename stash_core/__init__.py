"""Stash: where does the time of a distributed training iteration go, and what should you rent?

The flow is spec -> launch -> measure -> result file -> store -> decisions; the CLI (cli/) and the pages
(views/) call the module that owns each step. `import stash_core` stays cheap (no torch, no DuckDB) for the
worker processes and the command line. The map of the package is docs/architecture.md.
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

# The folder that holds the stash_core package: put on PYTHONPATH of every worker and helper process.
PACKAGE_PARENT = str(_Path(__file__).resolve().parent.parent)

__all__ = ["PACKAGE_PARENT", "__version__"]
