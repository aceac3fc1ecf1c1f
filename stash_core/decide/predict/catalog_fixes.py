"""What a user gives the catalog to make a configuration predictable: the figure its reason says is missing
(a network bandwidth, a GPU link), as the command that sets it."""

from __future__ import annotations

from stash_core.decide.predict.collectives import NO_GPU_LINK, NO_NETWORK
from stash_core.terminal import shell_word


def catalog_fixes(reason: str, name: str) -> list[str]:
    """The `stash instances set` commands that give instance `name` what `reason` says it lacks."""
    instance = shell_word(name)
    fixes = []
    if NO_NETWORK in reason:
        fixes.append(f"give its network: `stash instances set {instance} --network-gbps GBPS`")
    if NO_GPU_LINK in reason:
        fixes.append(
            f"give its GPU link: `stash instances set {instance} --interconnect LINK` (NVSwitch, NVLink, "
            "PCIe, PCIe peer-to-peer or none)"
        )
    return fixes
