"""What a simulation assumed, in words `stash schedule` and the Schedule page both say: how crossing
switches slows a spread job (the link model, or none), and where each job's network sensitivity came from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from stash_core.sched.fabric import Fabric

SOURCE_WORDS = {
    "trace": "from the trace's network_slowdown",
    "measured": "measured by Stash (multi-node profiles of their model)",
    "blox": "from Blox's penalty for their model",
    "blox default": "from Blox's default penalty (model not in Blox's list: 0.8 of the speed)",
    "drawn (blox)": "drawn from Blox's penalties (the trace names no model)",
}


def links_line(fabric: dict[str, Any]) -> str:
    """The link model of a simulation document's `fabric`: links shared by bandwidth, or the multiplier."""
    if fabric.get("node_gbps") is not None:
        links = Fabric(fabric["node_gbps"], fabric["uplink_gbps"], fabric["reference_gbps"])
        return f"links shared max-min fairly: {links.label()}"
    factor = f"{float(fabric.get('uplink_factor', 0)):g}"
    return f"no link model: crossing more switches than needed multiplies the stall by {factor}"


def sensitivity_counts(sources: Iterable[str]) -> dict[str, int]:
    """How many jobs took their network sensitivity from each source, most first."""
    return dict(Counter(sources).most_common())


def sensitivity_line(counts: dict[str, int]) -> str:
    return "network sensitivity (slowdown when spread) of the jobs: " + "; ".join(
        f"{n} {SOURCE_WORDS.get(kind, kind)}" for kind, n in counts.items()
    )
