"""Gradient all-reduce time of one configuration and how much of it backward leaves exposed.

The ring all-reduce alpha-beta model of stash_core.analysis.comm over DDP's buckets: inside an instance over
its GPU interconnect (NVLink/NVSwitch per direction from the accelerator table, PCIe x16 of the GPU's
generation), across instances over the catalog's network bandwidth (the per-node NIC, which a ring crosses
once per node). alpha is 0 (nominal bandwidth, as stash_core.decide.fit.physics does without a probe).
DDP all-reduces each bucket as soon as its gradients are ready, so all but the last bucket can hide behind
the rest of backward: exposed = max(last bucket's time, all-reduce time - backward time).
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.analysis.comm import alpha_beta_allreduce_s, ddp_bucket_sizes, ring_factor
from stash_core.catalog.accelerators import PCIE_X16_GBS, Accelerator


@dataclass(frozen=True)
class CommTime:
    interconnect_s: float
    network_s: float
    link: str


def interconnect_gbs(interconnect: str | None, accelerator: Accelerator) -> tuple[float | None, str]:
    """GB/s per direction between GPUs of one instance, and what it is; None when unknown."""
    text = (interconnect or "").lower()
    if "nvlink" in text or "nvswitch" in text:
        if accelerator.nvlink_gbs:
            return accelerator.nvlink_gbs, f"{interconnect} {accelerator.nvlink_gbs:g} GB/s"
        return None, f"{interconnect}: no NVLink figure for {accelerator.name}"
    if "pcie" in text and accelerator.pcie_gen in PCIE_X16_GBS:
        gbs = PCIE_X16_GBS[accelerator.pcie_gen]
        return gbs, f"PCIe Gen{accelerator.pcie_gen} x16 {gbs:g} GB/s"
    return None, f"interconnect {interconnect or 'unknown'} has no bandwidth in Stash's table"


def exposed_s(allreduce_s: float, last_bucket_s: float, backward_s: float) -> float:
    return max(last_bucket_s, allreduce_s - backward_s) if allreduce_s > 0 else 0.0


def comm_time(
    grad_bytes: float,
    workers: int,
    instances: int,
    interconnect: str | None,
    network_gbps: float | None,
    accelerator: Accelerator,
    backward_s: float,
) -> CommTime | str:
    """Exposed interconnect and network seconds per step, or why they cannot be predicted."""
    interconnect_s, network_s, links = 0.0, 0.0, []
    last_bucket = ddp_bucket_sizes(int(grad_bytes))[-1] if grad_bytes > 0 else 0
    if workers > 1:
        gbs, link = interconnect_gbs(interconnect, accelerator)
        if gbs is None:
            return link
        beta = 1.0 / (gbs * 1e9)
        full = alpha_beta_allreduce_s(int(grad_bytes), workers, 0.0, beta)
        last = ring_factor(workers) * last_bucket * beta
        interconnect_s = exposed_s(full, last, backward_s)
        links.append(link)
    if instances > 1:
        if not network_gbps:
            return "the catalog has no network bandwidth for this instance"
        world = workers * instances
        beta = 8.0 / (network_gbps * 1e9)
        full = alpha_beta_allreduce_s(int(grad_bytes), world, 0.0, beta)
        last = ring_factor(world) * last_bucket * beta
        network_s = max(0.0, exposed_s(full, last, backward_s) - interconnect_s)
        links.append(f"network {network_gbps:g} Gbit/s")
    return CommTime(interconnect_s, network_s, ", ".join(links))
