"""Process trees: start, signal and end a process with every descendant (psutil)."""

from __future__ import annotations
