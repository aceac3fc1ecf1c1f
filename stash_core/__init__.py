"""Stash: where does the time of a distributed training iteration go, and what should you rent?"""

__version__ = "0.1.0"

from pathlib import Path as _Path

# The folder that holds the stash_core package: put on PYTHONPATH of every worker and helper process.
PACKAGE_PARENT = str(_Path(__file__).resolve().parent.parent)
