"""Which GPU variant of the accelerator table an instance type carries, by its family: the clouds' and
SkyPilot's accelerator names do not tell variants apart (SkyPilot calls a p4de's A100 SXM4 80 GB and an Azure
NC A100 v4's A100 PCIe 80 GB both "A100-80GB"), the instance family does. Types of no listed family fall back
on the accelerator table's match of the given name (catalog/accelerators.py).
"""

from __future__ import annotations

import re

from stash_core.catalog.accelerators import find_accelerator

# Instance family (a regular expression on the type name) -> the accelerator table's variant: AWS, GCP, Azure.
FAMILY_VARIANTS = (
    (r"^p2\.", "NVIDIA K80"),
    (r"^g3s?\.", "NVIDIA M60"),
    (r"^p3\.", "NVIDIA V100 SXM2 16 GB"),
    (r"^p3dn\.", "NVIDIA V100 SXM2 32 GB"),
    (r"^g4dn\.", "NVIDIA T4 16 GB"),
    (r"^g5\.", "NVIDIA A10G 24 GB"),
    (r"^g6\.", "NVIDIA L4 24 GB"),
    (r"^gr6\.", "NVIDIA L4 24 GB"),
    (r"^g6e\.", "NVIDIA L40S 48 GB"),
    (r"^p4d\.", "NVIDIA A100 SXM4 40 GB"),
    (r"^p4de\.", "NVIDIA A100 SXM4 80 GB"),
    (r"^p5\.", "NVIDIA H100 SXM 80 GB"),
    (r"^p5e\.|^p5en\.", "NVIDIA H200 SXM 141 GB"),
    (r"^p6-b200\.", "NVIDIA B200 180 GB"),
    (r"^a2-highgpu-", "NVIDIA A100 SXM4 40 GB"),
    (r"^a2-megagpu-", "NVIDIA A100 SXM4 40 GB"),
    (r"^a2-ultragpu-", "NVIDIA A100 SXM4 80 GB"),
    (r"^a3-(highgpu|megagpu|edgegpu)-", "NVIDIA H100 SXM 80 GB"),
    (r"^a3-ultragpu-", "NVIDIA H200 SXM 141 GB"),
    (r"^a4-highgpu-", "NVIDIA B200 180 GB"),
    (r"^g2-standard-", "NVIDIA L4 24 GB"),
    (r"^Standard_NC\d+ads_A100_v4$", "NVIDIA A100 PCIe 80 GB"),
    (r"^Standard_ND96asr_v4$", "NVIDIA A100 SXM4 40 GB"),
    (r"^Standard_ND96amsr_A100_v4$", "NVIDIA A100 SXM4 80 GB"),
    (r"^Standard_ND96isr_H100_v5$", "NVIDIA H100 SXM 80 GB"),
    (r"^Standard_ND96isr_H200_v5$", "NVIDIA H200 SXM 141 GB"),
    (r"^Standard_NC\d+adi?s_H100_v5$", "NVIDIA H100 NVL 94 GB"),
    (r"^Standard_NC\d+as_T4_v3$", "NVIDIA T4 16 GB"),
    (r"^Standard_NC\d+r?s_v3$", "NVIDIA V100 PCIe 16 GB"),
    (r"^Standard_ND40rs_v2$", "NVIDIA V100 SXM2 32 GB"),
    (r"^Standard_NV\d+adm?s_A10_v5$", "NVIDIA A10 24 GB"),
    (r"^Standard_NV\d+s_v3$", "NVIDIA M60"),
    (r"^Standard_ND96isr_MI300X_v5$", "AMD MI300X 192 GB"),
)


def variant_for(name: str, skypilot_accelerator: str | None) -> str | None:
    """The accelerator table's variant of an instance type: by its family, else by SkyPilot's name."""
    for pattern, variant in FAMILY_VARIANTS:
        if re.search(pattern, name):
            return variant
    found = find_accelerator(skypilot_accelerator)
    return found.name if found else None
