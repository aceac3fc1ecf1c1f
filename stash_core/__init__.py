"""Stash: where does the time of a distributed training iteration go, and what should you rent?"""

__version__ = "0.1.0"
