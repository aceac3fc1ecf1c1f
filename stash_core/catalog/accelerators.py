"""The accelerator table (accelerators.csv, one row per GPU with the datasheet it comes from) and the match of
a catalog's accelerator name ("NVIDIA V100 16 GB", SkyPilot's "V100", "A100-80GB") to one of its rows.

Throughputs are dense peaks in TFLOPS (sparsity figures halved), memory bandwidth and NVLink in GB/s (NVLink
per direction), memory in GB. A missing TF32 or BF16 figure means the GPU has no such mode.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ACCELERATORS_CSV = Path(__file__).resolve().parent / "accelerators.csv"
# PCIe x16, one direction, GB/s: 8 / 16 / 32 GT/s per lane with 128b/130b coding (PCI-SIG base specs 3.0-5.0).
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0}
PRECISIONS = ("fp32", "tf32", "amp")


@dataclass(frozen=True)
class Accelerator:
    name: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_gbs: float
    memory_gb: float
    nvlink_gbs: float | None
    pcie_gen: int | None
    source: str

    def matrix_tflops(self, precision: str) -> float:
        """Peak of the matrix units in a precision: TF32 falls back to FP32 on GPUs without it."""
        if precision == "amp":
            return self.fp16_tflops or self.fp32_tflops
        if precision == "tf32":
            return self.tf32_tflops or self.fp32_tflops
        return self.fp32_tflops


def _key(name: str) -> str:
    text = re.sub(r"^NVIDIA\s*|^TESLA\s*", "", str(name).strip().upper())
    return re.sub(r"[^A-Z0-9]", "", text)


@functools.cache
def accelerator_table() -> dict[str, Accelerator]:
    """Every row of accelerators.csv by its name."""
    table = {}
    with open(ACCELERATORS_CSV, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            table[row["name"]] = Accelerator(
                row["name"],
                float(row["fp32_tflops"]),
                _maybe(row["tf32_tflops"]),
                _maybe(row["fp16_tflops"]),
                _maybe(row["bf16_tflops"]),
                float(row["memory_gbs"]),
                float(row["memory_gb"]),
                _maybe(row["nvlink_gbs"]),
                int(row["pcie_gen"]) if row["pcie_gen"] else None,
                row["source"],
            )
    return table


@functools.cache
def _aliases() -> dict[str, str]:
    aliases = {}
    with open(ACCELERATORS_CSV, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            aliases[_key(row["name"])] = row["name"]
            for alias in row["aliases"].split("|"):
                aliases[_key(alias)] = row["name"]
    return aliases


_MEMORY_SUFFIX = re.compile(r"^(.*?)[\s-]*(\d+(?:\.\d+)?)\s*GB$", re.IGNORECASE)
MEMORY_TOLERANCE = 0.10  # a catalog's usable memory (L4: 22888 MiB) is a little below the marketed 24 GB


def find_accelerator(name: str | None) -> Accelerator | None:
    """The table row for a catalog accelerator name, or None when the table has none.

    A name with a memory size that no alias spells ("NVIDIA T4 16 GB", "NVIDIA L4 22 GB" as imported from
    SkyPilot) matches its model's row only when the row's memory agrees within MEMORY_TOLERANCE, so that an
    H100 NVL (94 GB) is not taken for the 80 GB H100 SXM.
    """
    if not name:
        return None
    found = _aliases().get(_key(name))
    if found:
        return accelerator_table()[found]
    match = _MEMORY_SUFFIX.match(str(name).strip())
    if not match:
        return None
    base = _aliases().get(_key(match.group(1)))
    if base is None:
        return None
    row = accelerator_table()[base]
    memory_gb = float(match.group(2))
    return row if abs(row.memory_gb - memory_gb) <= MEMORY_TOLERANCE * row.memory_gb else None


def _maybe(text: str) -> float | None:
    return float(text) if text.strip() else None
