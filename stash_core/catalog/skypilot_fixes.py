"""What SkyPilot's vms.csv gets wrong or leaves apart, set right the same way for `stash instances import
--skypilot` (catalog/skypilot.py) and for the shipped catalog (scripts/refresh_catalog.py).

- GPU counts that contradict the cloud's own documentation (CORRECTIONS).
- GCP prices a GPU machine type (a2, a3, g2) without its GPUs, which have rows of their own (no instance
  type, the accelerator's name and count, per zone): the machine's row of a zone gets the GPUs of that zone
  added, price and spot price summed, as GCP bills them (with_bundled_gpus). Read alone, such a row is a
  machine of no GPU at a fraction of its price.
"""

from __future__ import annotations

import re
from typing import Any

# Where a catalog's count contradicts the cloud's own documentation: (count, why).
CORRECTIONS = {
    "Standard_ND96isr_H100_v5": (
        8,
        "SkyPilot's v6 Azure catalog gives 12 GPUs; Azure's ND H100 v5 has 8 H100",
    ),
}

# GCP machine family -> (SkyPilot's accelerator name, GPUs of a size): the GPUs come with the machine type.
_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
GCP_BUNDLED = (
    (r"^a2-(highgpu|megagpu)-(?P<n>\d+)g$", "A100", int),
    (r"^a2-ultragpu-(?P<n>\d+)g$", "A100-80GB", int),
    (r"^a3-highgpu-(?P<n>\d+)g$", "H100", int),
    (r"^a3-megagpu-(?P<n>\d+)g$", "H100-MEGA", int),
    (r"^a3-ultragpu-(?P<n>\d+)g$", "H200", int),
    (r"^g2-standard-(?P<n>\d+)$", "L4", lambda n: _G2_GPUS.get(int(n), 0)),
)

Entry = tuple[int, dict[str, Any]]  # (the file's line number, the row's typed cells)


def gcp_bundled(name: str) -> tuple[str, int] | None:
    """SkyPilot's accelerator name and count of a GCP machine type that comes with GPUs; None otherwise."""
    for pattern, accelerator, count in GCP_BUNDLED:
        found = re.match(pattern, name)
        if found and count(found.group("n")):
            return accelerator, count(found.group("n"))
    return None


def with_bundled_gpus(
    by_type: dict[str, list[Entry]], attachable: list[Entry], skipped: list[str]
) -> dict[str, list[Entry]]:
    """`by_type` with each GCP machine type that comes with GPUs priced with them: in every zone where the
    file prices both, one entry of the machine plus its GPUs; a type whose GPUs the file does not price in
    any of its zones is left out, and said in `skipped`. Other types are as they were."""
    gpus = {(values["AcceleratorName"], int(values["AcceleratorCount"] or 0), values.get("AvailabilityZone")):
            values for _, values in attachable}  # fmt: skip
    result: dict[str, list[Entry]] = {}
    for name, entries in by_type.items():
        bundled = gcp_bundled(name)
        if bundled is None or int(entries[0][1]["AcceleratorCount"] or 0):
            result[name] = entries  # not a GCP GPU machine, or a file that already counts its GPUs
            continue
        summed = [
            (line, _machine_with(values, gpus.get((*bundled, values.get("AvailabilityZone")))))
            for line, values in entries
        ]
        summed = [(line, values) for line, values in summed if values is not None]
        if summed:
            result[name] = summed
        else:
            skipped.append(f"{name}: its {bundled[1]} x {bundled[0]} have no price in the file's zones")
    return result


def _machine_with(machine: dict[str, Any], gpu: dict[str, Any] | None) -> dict[str, Any] | None:
    """The machine's row of a zone with its GPUs' name, count and prices added; None without their price."""
    if gpu is None or machine["Price"] is None or gpu["Price"] is None:
        return None
    spot = None
    if machine["SpotPrice"] is not None and gpu["SpotPrice"] is not None:
        spot = round(machine["SpotPrice"] + gpu["SpotPrice"], 5)
    return {
        **machine,
        "AcceleratorName": gpu["AcceleratorName"],
        "AcceleratorCount": gpu["AcceleratorCount"],
        "GpuInfo": gpu.get("GpuInfo") or machine.get("GpuInfo") or {},
        "Price": round(machine["Price"] + gpu["Price"], 5),
        "SpotPrice": spot,
        "bundled": True,
    }
