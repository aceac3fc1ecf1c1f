"""What NCCL's all-reduce achieves on each class of interconnect, by message size, from published runs.

collective_bandwidth.csv holds nccl-tests' bus bandwidth (busbw, GB/s) by message size, each row with its
source (docs/collective-bandwidth.md). Inside a machine, a class's curve is the median busbw of its rows at
each size, interpolated in log(size); below the smallest size the time of that size is kept (latency-bound),
above the largest its bandwidth. Across machines, a network family's curve is the achieved fraction of the
nodes' NIC line rate at each size, so that one curve serves 1 x 100 Gb/s and 8 x 200 Gb/s.

A hierarchical all-reduce of S bytes over n GPUs on each of N machines (NCCL's trees or collective network:
the intra-machine links and the NICs carry their parts at once) moves 2(N-1)/N x S through each machine's
NICs, where the ranks' bus bandwidth counts 2(k-1)/k x S for k = n N ranks (a flat ring through the NICs
carries the ranks' 2(k-1)/k): a published 2-machine busbw above the NICs' line rate says the runs were of the
hierarchical kind. So the NIC fraction is busbw x (2(N-1)/N) / (2(k-1)/k) /
line rate, and the all-reduce is limited by the slower part: busbw = min(intra-machine busbw, NIC fraction x
line rate x (2(k-1)/k) / (2(N-1)/N)), taking S x 2(k-1)/k / busbw.
"""

from __future__ import annotations

import csv
import functools
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from stash_core.analysis.comm import ring_factor
from stash_core.catalog.accelerators import Accelerator

COLLECTIVE_CSV = Path(__file__).with_name("collective_bandwidth.csv")
# Network families of the multi-machine rows: the class names in the CSV that share a transport.
FAMILIES = {
    "efa": "efa", "infiniband": "infiniband", "roce": "infiniband", "tcpxo": "gpudirect-tcp",
    "tcpx": "gpudirect-tcp", "ethernet": "tcp", "socket": "tcp",
}  # fmt: skip
# DDP's buckets are 1 and 25 MiB: a curve whose smallest message is larger than this says nothing of them.
LARGEST_FIRST_SIZE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class BusCurve:
    """busbw (GB/s, or a fraction of line rate for a network family) by message size, ascending."""

    name: str
    sizes: tuple[float, ...]
    values: tuple[float, ...]
    sources: tuple[str, ...]

    def scaled(self, share: float) -> BusCurve:
        """The same curve at `share` of its bandwidth (fewer links of the same kind)."""
        if share == 1.0:
            return self
        return BusCurve(self.name, self.sizes, tuple(value * share for value in self.values), self.sources)

    def at(self, size_bytes: float) -> float:
        """The curve at `size_bytes`: log-linear between points; the smallest size's time below it."""
        sizes, values = self.sizes, self.values
        if size_bytes <= sizes[0]:
            return values[0] * size_bytes / sizes[0]  # the same time as the smallest measured message
        if size_bytes >= sizes[-1]:
            return values[-1]
        for index in range(1, len(sizes)):
            if size_bytes <= sizes[index]:
                low, high = math.log(sizes[index - 1]), math.log(sizes[index])
                share = (math.log(size_bytes) - low) / (high - low)
                return values[index - 1] + share * (values[index] - values[index - 1])
        return values[-1]


# A V100 hybrid cube mesh (DGX-1, HGX-1) gives each GPU 6 NVLink 2 links, all of them used by NCCL's rings over 8
# GPUs; the published curves are of 8. The first k GPUs of the board (as CUDA numbers them, as a job on k of them
# gets them) are joined by fewer: GPU 0 has 1 link to GPU 1, and 1 + 1 + 2 to GPUs 1-3 of its quad. A job on k of
# the 8 reaches the 8-GPU bus bandwidth times the share of the links it has (nvidia-smi topo of a DGX-1V:
# GPU0-GPU1 NV1, GPU0-GPU2 NV1, GPU0-GPU3 NV2, GPU0-GPU4 NV2).
CUBEMESH_LINKS = {2: 1, 3: 2, 4: 4, 8: 6}
CUBEMESH_CLASS = "nvlink2_cubemesh"


def subset_share(klass: str, gpus: int) -> float:
    """The share of the class's published (8-GPU) bus bandwidth that `gpus` GPUs of one machine reach: below 1
    only for a cube mesh, where fewer GPUs have fewer links between them."""
    if klass != CUBEMESH_CLASS or gpus >= 8:
        return 1.0
    links = max((count for size, count in CUBEMESH_LINKS.items() if size <= gpus), default=CUBEMESH_LINKS[2])
    return links / CUBEMESH_LINKS[8]


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value > 0 else None


_PLATEAU = re.compile(r"plateau busbw for messages >= (\d+)\s*MiB")


@functools.cache
def load_rows(path: Path = COLLECTIVE_CSV) -> tuple[dict, ...]:
    """The rows with a bus bandwidth and a message size: a row whose source gives one figure for every
    message from a size up ("plateau busbw for messages >= 32MiB") counts at that size. A multi-machine
    row that names the network's rate but not its NICs counts that rate as the node's one link."""
    if not path.exists():
        return ()
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            plateau = _PLATEAU.search(row.get("measured") or "")
            if not _float(row.get("message_bytes")) and plateau:
                row = {**row, "message_bytes": str(int(plateau.group(1)) * 2**20)}
            if _float(row.get("nic_gbps")) and not _float(row.get("nics_per_node")):
                row = {**row, "nics_per_node": "1"}
            if _float(row.get("busbw_gbs")) and _float(row.get("message_bytes")):
                rows.append(row)
    return tuple(rows)


def family_of(klass: str) -> str | None:
    """The network family (rdma, tcp) of a multi-machine class name, None for an intra-machine one."""
    for prefix, family in FAMILIES.items():
        if klass.startswith(prefix):
            return family
    return None


def _curve(name: str, points: list[tuple[float, float, str]]) -> BusCurve | None:
    by_size: dict[float, list[float]] = {}
    sources: set[str] = set()
    for size, value, source in points:
        by_size.setdefault(size, []).append(value)
        sources.add(source)
    if not by_size or min(by_size) > LARGEST_FIRST_SIZE_BYTES:
        return None
    sizes = tuple(sorted(by_size))
    return BusCurve(name, sizes, tuple(statistics.median(by_size[s]) for s in sizes), tuple(sorted(sources)))


@functools.cache
def intra_curve(klass: str, exclude_source: str | None = None) -> BusCurve | None:
    """The median busbw curve of one intra-machine class (rows on one machine)."""
    points = [
        (float(row["message_bytes"]), float(row["busbw_gbs"]), row["source_id"])
        for row in load_rows()
        if row["interconnect_class"] == klass and (row.get("nodes") or "1") == "1"
        and row["source_id"] != exclude_source
    ]  # fmt: skip
    return _curve(klass, points)


@functools.cache
def network_curve(family: str, exclude_source: str | None = None) -> BusCurve | None:
    """The achieved fraction of the NICs' line rate by message size, over the family's multi-machine rows."""
    points = []
    for row in load_rows():
        nodes, nics, nic_gbps = (
            _float(row.get("nodes")),
            _float(row.get("nics_per_node")),
            _float(row.get("nic_gbps")),
        )
        if not nodes or nodes < 2 or not nics or not nic_gbps or row["source_id"] == exclude_source:
            continue
        if family_of(row["interconnect_class"]) != family:
            continue
        line_gbs = nics * nic_gbps / 8.0
        ranks = int(nodes) * int(_float(row.get("gpus_per_node")) or 1)
        # the NICs carry the machines' all-reduce (2(N-1)/N of the bytes), not the ranks' (busbw's 2(k-1)/k)
        node_gbs = float(row["busbw_gbs"]) * ring_factor(int(nodes)) / ring_factor(ranks)
        points.append((float(row["message_bytes"]), min(1.0, node_gbs / line_gbs), row["source_id"]))
    return _curve(family, points)


# Why an all-reduce cannot be predicted where the instance catalog lacks a value (recommend's advice names
# the `stash instances set` line that gives it).
NO_GPU_LINK = "the catalog names no GPU link for this instance"
NO_NETWORK = "the catalog has no network bandwidth for this instance"


def intra_class(interconnect: str | None, accelerator: Accelerator) -> tuple[str | None, str]:
    """(the class of the GPUs' link inside one instance, how it was named) or (None, why there is none)."""
    # the first link the text names (given now, it starts the text; stored by older versions: "8x NVSwitch")
    named = re.search("nvswitch|nvlink|pcie", (interconnect or "").lower())
    link = named.group() if named else None
    name = accelerator.name.upper()
    generation = next((g for g in ("GH200", "H200", "H100", "B200", "A100", "V100") if g in name), None)
    if link == "nvswitch":
        klass = {"V100": "nvswitch_v100", "A100": "nvswitch_a100", "H100": "nvswitch_h100",
                 "H200": "nvswitch_h200", "GH200": "nvswitch_h200", "B200": "nvswitch_b200"}.get(generation or "")  # fmt: skip
        if klass is None:
            return None, f"NVSwitch with {accelerator.name}: no NVSwitch class for this GPU"
        return klass, f"NVSwitch ({klass})"
    if link == "nvlink":
        if generation == "V100":
            return "nvlink2_cubemesh", "NVLink cube-mesh (nvlink2_cubemesh)"
        return (
            None,
            f"NVLink without a switch between {accelerator.name} GPUs: no published all-reduce figures",
        )
    if link == "pcie":
        if accelerator.pcie_gen is None:
            return None, f"PCIe: the accelerator table has no PCIe generation for {accelerator.name}"
        klass = f"pcie_gen{accelerator.pcie_gen}"
        return klass, f"PCIe Gen{accelerator.pcie_gen} ({klass})"
    return None, f"interconnect {interconnect or 'unknown'}: {NO_GPU_LINK}"


# The GPU-direct network of each cloud's 400 Gbit/s and faster instances (the catalog's figure is the sum of
# several NICs): AWS EFA, Azure InfiniBand, GCP GPUDirect-TCPX(O).
RDMA_FAMILY = {
    "aws": ("efa", "EFA"),
    "azure": ("infiniband", "InfiniBand"),
    "gcp": ("gpudirect-tcp", "GPUDirect-TCPX"),
}
RDMA_GBPS = 400


def network_family(instance: dict) -> tuple[str, str]:
    """(family, name) of an instance's network between machines: its cloud's GPU-direct network at
    RDMA_GBPS and above, TCP sockets below."""
    gbps = _float(str(instance.get("network_gbps") or "")) or 0.0
    provider = str(instance.get("provider") or "").lower()
    if gbps >= RDMA_GBPS:
        family, name = RDMA_FAMILY.get(provider, ("infiniband", "RDMA"))
        return family, f"{name} {gbps:g} Gbit/s"
    return "tcp", f"TCP {gbps:g} Gbit/s"


@dataclass(frozen=True)
class Fabric:
    """The links of one configuration: the intra-machine curve (None with one GPU per machine) and the
    network (None on one machine), with what they are."""

    intra: BusCurve | None
    network: BusCurve | None
    network_line_gbs: float
    gpus_per_node: int
    nodes: int
    description: str

    def busbw_gbs(self, size_bytes: float) -> float:
        rates = []
        if self.intra is not None and self.gpus_per_node > 1:
            rates.append(self.intra.at(size_bytes))
        if self.network is not None and self.nodes > 1:
            node_gbs = self.network.at(size_bytes) * self.network_line_gbs
            rates.append(node_gbs * ring_factor(self.gpus_per_node * self.nodes) / ring_factor(self.nodes))
        return min(rates) if rates else math.inf

    def allreduce_s(self, size_bytes: float) -> float:
        ranks = self.gpus_per_node * self.nodes
        if ranks <= 1 or size_bytes <= 0:
            return 0.0
        return size_bytes * ring_factor(ranks) / (self.busbw_gbs(size_bytes) * 1e9)


def fabric(
    gpus_per_node: int,
    nodes: int,
    interconnect: str | None,
    accelerator: Accelerator,
    instance: dict,
    exclude_source: str | None = None,
) -> Fabric | str:
    """The Fabric of `nodes` x `gpus_per_node`, or why its all-reduce cannot be predicted."""
    intra, network, line_gbs, parts = None, None, 0.0, []
    if gpus_per_node > 1:
        klass, named = intra_class(interconnect, accelerator)
        if klass is None:
            return named
        intra = intra_curve(klass, exclude_source)
        if intra is None:
            return f"{named}: no published all-reduce figure for this class (docs/collective-bandwidth.md)"
        intra = intra.scaled(subset_share(klass, gpus_per_node))
        parts.append(named)
    if nodes > 1:
        gbps = _float(str(instance.get("network_gbps") or ""))
        if not gbps:
            return NO_NETWORK
        family, named = network_family(instance)
        network = network_curve(family, exclude_source)
        if network is None:
            return f"{named}: no published multi-machine all-reduce figure for this network family"
        line_gbs = gbps / 8.0
        parts.append(named)
    return Fabric(intra, network, line_gbs, gpus_per_node, nodes, ", ".join(parts))
