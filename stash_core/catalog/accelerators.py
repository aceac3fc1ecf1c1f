"""The accelerator table (accelerators.csv, one row per GPU variant with the datasheet it comes from) and the
match of a GPU name, however it is spelled, to one of its rows.

Throughputs are dense peaks in TFLOPS (sparsity figures halved), memory bandwidth and NVLink in GB/s (NVLink
per direction), memory in the vendors' "GB", which for GPU memory are binary (a 16 GB V100 has 16384 MiB):
`memory_gib` says so in its name, `memory_bytes` counts them. A missing TF32 or BF16 figure means the GPU has
no such mode.

A row is found by any of its names (`find_accelerator`, `match_accelerator`):
  - its table name ("NVIDIA A100 SXM4 80 GB") and its names in older Stash catalogs ("NVIDIA A100 80 GB");
  - the names NVML (nvidia-smi, torch.cuda.get_device_name) reports ("NVIDIA A100-SXM4-80GB"), which a
    profile's fingerprint records;
  - SkyPilot's accelerator names ("A100-80GB", "H100-MEGA") and short names ("A100", "V100").
Names are compared without case, spaces, punctuation and a leading "NVIDIA" or "Tesla". A short name that
several variants carry ("A100", "H100", "V100-32GB") is ambiguous: it resolves to the variant listed first in
the CSV, by design the one clouds rent under that name (SXM before PCIe, 40 GB before 80 GB as SkyPilot's
"A100" means), and `match_accelerator` says that it was ambiguous and which variants it could have meant.
A name with a memory size no row spells ("NVIDIA T4 16 GB", "NVIDIA L4 22 GB" as imported from SkyPilot)
matches the variant of that model whose memory agrees within MEMORY_TOLERANCE. Anything else is None.
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
GIB_BYTES = 2**30
MEMORY_TOLERANCE = 0.10  # a catalog's usable memory (L4: 22888 MiB) is a little below the marketed 24 GB
_NAME_COLUMNS = ("aliases", "nvml_names", "skypilot_names")


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
    sm_count: int | None = None
    nvml_names: tuple[str, ...] = ()
    skypilot_names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    base_mhz: float | None = None  # the clock guaranteed at the board's power limit
    boost_mhz: float | None = None  # the clock the datasheet's peaks are counted at

    @property
    def base_clock_share(self) -> float:
        """Base over boost clock: how far the compute peaks may fall under a sustained load (1.0 unknown)."""
        if self.base_mhz and self.boost_mhz:
            return min(self.base_mhz / self.boost_mhz, 1.0)
        return 1.0

    @property
    def fp32_lanes_per_sm(self) -> float | None:
        """FP32 results per SM per clock (64 on V100 and A100, 128 on Hopper, Ada and GA10x, 192 on Kepler),
        from the FP32 peak, the SM count and the boost clock it is counted at (None when one is unknown)."""
        if not (self.sm_count and self.boost_mhz):
            return None
        return self.fp32_tflops * 1e12 / (2.0 * self.sm_count * self.boost_mhz * 1e6)

    def matrix_tflops(self, precision: str) -> float:
        """Peak of the matrix units in a precision: TF32 falls back to FP32 on GPUs without it."""
        if precision == "amp":
            return self.fp16_tflops or self.fp32_tflops
        if precision == "tf32":
            return self.tf32_tflops or self.fp32_tflops
        return self.fp32_tflops

    @property
    def memory_gib(self) -> float:
        """Memory of one GPU in GiB: the marketed GB of GPU memory are binary (16 GB V100: 16384 MiB)."""
        return self.memory_gb

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GIB_BYTES)


@dataclass(frozen=True)
class AcceleratorMatch:
    """A name's row; ambiguous when several variants carry the name (candidates: their names, the chosen
    one first)."""

    accelerator: Accelerator
    ambiguous: bool
    candidates: tuple[str, ...]

    def note(self) -> str:
        """One line for a user: empty when the name was not ambiguous."""
        if not self.ambiguous:
            return ""
        others = ", ".join(self.candidates[1:])
        return f"GPU name is ambiguous: taken as {self.accelerator.name} (could also be {others})"


def name_key(name: str) -> str:
    """A GPU name as compared: upper case, without a leading NVIDIA/Tesla, spaces and punctuation."""
    text = str(name).strip().upper()
    text = re.sub(r"^(NVIDIA|TESLA)[\s_-]*", "", text)
    text = re.sub(r"^(TESLA)[\s_-]*", "", text)  # "NVIDIA Tesla V100-SXM2-16GB"
    return re.sub(r"[^A-Z0-9]", "", text)


@functools.cache
def _rows() -> tuple[dict[str, str], ...]:
    with open(ACCELERATORS_CSV, encoding="utf-8", newline="") as handle:
        return tuple(csv.DictReader(handle))


@functools.cache
def accelerator_table() -> dict[str, Accelerator]:
    """Every row of accelerators.csv by its name, in file order."""
    return {row["name"]: _accelerator(row) for row in _rows()}


def _accelerator(row: dict[str, str]) -> Accelerator:
    return Accelerator(
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
        int(row["sm_count"]) if row.get("sm_count") else None,
        _names(row.get("nvml_names")),
        _names(row.get("skypilot_names")),
        _names(row.get("aliases")),
        _maybe(row.get("base_mhz", "")),
        _maybe(row.get("boost_mhz", "")),
    )


@functools.cache
def _index() -> dict[str, tuple[str, ...]]:
    """Every name key to the rows carrying it, in file order (the first: the default of an ambiguous name)."""
    index: dict[str, list[str]] = {}
    for row in _rows():
        names = [row["name"], *(n for column in _NAME_COLUMNS for n in _names(row.get(column)))]
        for name in names:
            rows = index.setdefault(name_key(name), [])
            if row["name"] not in rows:
                rows.append(row["name"])
    index.pop("", None)
    return {key: tuple(rows) for key, rows in index.items()}


_MEMORY_SUFFIX = re.compile(r"^(.*?)[\s-]*(\d+(?:\.\d+)?)\s*G(?:i)?B$", re.IGNORECASE)


def match_accelerator(name: str | None) -> AcceleratorMatch | None:
    """The table row a GPU name means, and whether the name was ambiguous; None when no row fits."""
    if not name or not str(name).strip():
        return None
    table = accelerator_table()
    found = _index().get(name_key(name))
    if found:
        return AcceleratorMatch(table[found[0]], len(found) > 1, found)
    match = _MEMORY_SUFFIX.match(str(name).strip())
    if not match:
        return None
    base = _index().get(name_key(match.group(1)))
    if not base:
        return None
    memory_gb = float(match.group(2))
    fits = tuple(
        n for n in base if abs(table[n].memory_gb - memory_gb) <= MEMORY_TOLERANCE * table[n].memory_gb
    )
    if not fits:
        return None
    return AcceleratorMatch(table[fits[0]], len(fits) > 1, fits)


def find_accelerator(name: str | None) -> Accelerator | None:
    """The table row for a GPU name (table, NVML, SkyPilot or short name), or None when the table has none.

    An ambiguous short name gives its default variant; `match_accelerator` tells that it was ambiguous.
    """
    found = match_accelerator(name)
    return found.accelerator if found else None


def _names(cell: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (cell or "").split("|") if part.strip())


def _maybe(text: str) -> float | None:
    return float(text) if text.strip() else None
