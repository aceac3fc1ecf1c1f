"""Gradient all-reduce time of one configuration and how much of it backward leaves exposed.

The all-reduce of each DDP bucket takes what NCCL achieves on the configuration's links at that message size
(collectives.py: published nccl-tests bus bandwidths, hierarchical across machines); backward hides what
DDP's bucket schedule lets it hide, less what the collectives beside it cost it (ddp_overlap.py). The
interconnect stall is the step's gain on one machine of `workers` GPUs; the network stall what the machines
add to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.collectives import Fabric, fabric, intra_class
from stash_core.decide.predict.comm_fit import comm_stated_error, fitted_comm_params
from stash_core.decide.predict.ddp_overlap import CommParams, ddp_overlap


@dataclass(frozen=True)
class CommTime:
    interconnect_s: float
    network_s: float
    link: str
    link_class: str | None = None  # the GPUs' link inside one instance (collectives.intra_class), if any


def added_s(
    grad_bytes: float, links: Fabric, step_s: float, backward_s: float, params: CommParams, memory_gbs: float
) -> float:
    """Seconds DDP adds to a one-GPU step of `step_s` over `links` (0 for one rank)."""
    ranks = links.gpus_per_node * links.nodes
    if ranks <= 1 or grad_bytes <= 0:
        return 0.0
    return ddp_overlap(grad_bytes, step_s, backward_s, links.allreduce_s, ranks, params, memory_gbs).added_s


def comm_time(
    grad_bytes: float,
    workers: int,
    instances: int,
    interconnect: str | None,
    network_gbps: float | None,
    accelerator: Accelerator,
    step_s: float,
    backward_s: float,
    provider: str | None = None,
    params: CommParams | None = None,
) -> CommTime | str:
    """Exposed interconnect and network seconds per step (one GPU's step: `step_s`, its backward
    `backward_s`), or why they cannot be predicted."""
    params = fitted_comm_params() if params is None else params
    instance = {"network_gbps": network_gbps, "provider": provider}
    whole = fabric(workers, instances, interconnect, accelerator, instance)
    if isinstance(whole, str):
        return whole
    interconnect_s = 0.0
    if workers > 1:
        one_machine = fabric(workers, 1, interconnect, accelerator, instance)
        assert not isinstance(one_machine, str)  # its part of `whole` was found above
        interconnect_s = added_s(grad_bytes, one_machine, step_s, backward_s, params, accelerator.memory_gbs)
    total_s = added_s(grad_bytes, whole, step_s, backward_s, params, accelerator.memory_gbs)
    link_class = intra_class(interconnect, accelerator)[0] if workers > 1 else None
    return CommTime(interconnect_s, max(0.0, total_s - interconnect_s), whole.description, link_class)


def comm_note(link: str, nodes: int, link_class: str | None = None) -> str:
    """The line a prediction prints about its all-reduce: the links and the held-out error of the step (its
    interconnect class's own where that runs wider)."""
    error, validated, wider = comm_stated_error(nodes, link_class)
    if error is None:
        held_out = "not validated: no comm_summary.json (bench/comm_report.py --write)"
    elif validated:
        held_out = f"step time ±{error:.1%} on held-out multi-GPU training figures"
        held_out += f", {wider}" if wider else ""
    else:
        held_out = f"step time ±{error:.1%}, unvalidated: too few held-out figures across machines"
    return f"all-reduce over {link}: published NCCL bus bandwidth, DDP's bucket overlap ({held_out})"


def comm_method_line() -> str:
    """One line on how communication is predicted and how far off it was on sources it never saw."""
    from stash_core.decide.predict.comm_fit import load_comm_summary

    summary = load_comm_summary()
    if not summary:
        return "communication: published NCCL bus bandwidths and DDP's bucket overlap (not validated)"
    params = summary.get("params") or {}
    counts = summary.get("stated_from_figures") or {}
    errors = ", ".join(
        f"{scope} ±{value:.1%}" + ("" if (summary.get("validated") or {}).get(scope) else
                                   f" (unvalidated: {counts.get(scope, 0)} held-out figures)")
        for scope, value in (summary.get("stated_error") or {}).items() if isinstance(value, int | float)
    )  # fmt: skip
    by_class = summary.get("stated_error_by_class") or {}
    wider = ", ".join(f"{klass} ±{value:.1%}" for klass, value in sorted(by_class.items()))
    return (
        "communication: published NCCL bus bandwidth per interconnect class, DDP's buckets overlapping "
        f"backward, contention {params.get('contention', 0):g} and jitter {params.get('jitter', 0):g} fitted "
        f"on {summary.get('fitted_figures', summary.get('figures'))} published multi-GPU PyTorch figures; "
        f"held-out error of the step: {errors}" + (f" (wider for {wider})" if wider else "")
    )
