"""Eq. 10 of spotDNN: the largest batch per GPU against the GPU's memory, b_k = 2^floor(log2(a2 mem_k + b2)).

A training step's peak memory grows about linearly with the batch: peak(b) = c + d b (weights, gradients
and optimiser state in c, activations in d). Measured at a few batch sizes (memprobe.py, one process per
batch) and fitted by least squares, the largest batch that fits mem bytes is (mem - c) / d, which is eq. 10
with a2 = 1 / d and b2 = -c / d. Everything here is in GiB (2**30 bytes): mem, and a2 in samples per GiB.

The GPU memory of each catalog accelerator comes from the accelerator table (catalog/accelerators.py, the one
source of GPU facts), which matches any spelling of the GPU's name ("NVIDIA V100 SXM2 16 GB", "V100",
"Tesla V100-SXM2-16GB"); the vendors' GB of GPU memory are binary, so a 16 GB V100 is 16 GiB. A name the
table lacks has no memory (None), never a guess. On a CPU the peak is the process's resident set less what it
held before the model: a stand-in for the GPU's allocation, said so.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stash_core import PACKAGE_PARENT
from stash_core.catalog.accelerators import GIB_BYTES, find_accelerator
from stash_core.errors import UsageError

GIB = GIB_BYTES
MAX_FIT_ERROR = 0.10  # largest relative residual of the linear peak-memory fit that is still used
MIN_BATCHES = 3  # two points fit any line exactly: the linearity check needs a third
# The peak must rise between the smallest and the largest batch by more than the fit's own error bound (of
# the smallest batch's peak): a smaller rise is the allocator's noise, and a2 = 1 / slope would follow it.
MIN_GROWTH = MAX_FIT_ERROR
PROBE_TIMEOUT_S = 600
# glibc's adaptive mmap threshold lets freed tensors stay in the heap, so a CPU process's peak resident set
# wanders by tens of MiB between identical runs; a fixed threshold maps every large tensor on its own and
# returns it when freed, and the peak follows what the step holds (repeatable to 0.1 MiB here)
CPU_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


@dataclass(frozen=True)
class MemoryFit:
    a2: float  # samples per GiB
    b2: float  # samples
    batches: tuple[int, ...]
    peak_bytes: tuple[int, ...]
    max_rel_error: float  # largest |fitted - measured| / measured
    device: str

    def largest_batch(self, memory_gib: float) -> int | None:
        """Eq. 10: the largest power-of-two batch per GPU; None when not even one sample fits."""
        return eq10_batch(self.a2, self.b2, memory_gib)

    def as_dict(self) -> dict:
        return {"a2": self.a2, "b2": self.b2, "batches": list(self.batches),
                "peak_bytes": list(self.peak_bytes), "max_rel_error": self.max_rel_error,
                "device": self.device, "bound": MAX_FIT_ERROR}  # fmt: skip


def eq10_batch(a2: float, b2: float, memory_gib: float) -> int | None:
    """Eq. 10: b = 2^floor(log2(a2 x memory + b2)), the largest power-of-two batch per GPU of `memory_gib`;
    None when not even one sample fits."""
    room = a2 * memory_gib + b2
    return 2 ** math.floor(math.log2(room)) if math.isfinite(room) and room >= 1 else None


def fit_memory(batches: list[int], peak_bytes: list[int], device: str = "cpu") -> MemoryFit:
    """a2, b2 of eq. 10 from peak memory at batch sizes (least squares line, then inverted)."""
    if len(batches) != len(peak_bytes) or len(set(batches)) < MIN_BATCHES:
        raise UsageError(
            f"memory fit: give the peak memory at {MIN_BATCHES} or more different batch sizes (two always "
            "fit a line, so its linearity could not be checked)"
        )
    b = np.asarray(batches, dtype=float)
    peak = np.asarray(peak_bytes, dtype=float)
    if np.any(b < 1) or np.any(peak <= 0) or not np.all(np.isfinite(peak)):
        raise UsageError("memory fit: batch sizes >= 1 and positive peak memory")
    slope, intercept = np.polyfit(b, peak, 1)
    if slope <= 0:
        raise UsageError(
            "memory fit: the peak memory does not grow with the batch "
            f"({', '.join(f'{int(x)}: {p / 2**20:.0f} MiB' for x, p in zip(b, peak, strict=True))}); "
            "measure at larger batches"
        )
    low, high = peak[int(np.argmin(b))], peak[int(np.argmax(b))]
    if high - low <= MIN_GROWTH * low:
        raise UsageError(
            f"memory fit: the peak grows by {(high - low) / 2**20:.1f} MiB from batch {int(b.min())} to "
            f"{int(b.max())}, not clearly above the noise (needs more than {MIN_GROWTH:.0%} of "
            f"{low / 2**20:.0f} MiB); measure over a wider range of batch sizes"
        )
    error = float(np.max(np.abs(intercept + slope * b - peak) / peak))
    return MemoryFit(
        a2=GIB / slope, b2=-intercept / slope, batches=tuple(int(x) for x in b),
        peak_bytes=tuple(int(p) for p in peak), max_rel_error=error, device=device,
    )  # fmt: skip


def gpu_memory_gib(accelerator: str | None) -> float | None:
    """Memory of one GPU in GiB from the catalog's accelerator name (the accelerator table); None when the
    table has no such GPU."""
    found = find_accelerator(accelerator)
    return found.memory_gib if found else None


def batch_table(fit: MemoryFit, instances: list[dict]) -> list[dict]:
    """b_k of eq. 10 for each catalog instance with accelerators (rows: name, accelerator, GiB, batch, and
    whether that batch is outside those measured: the line extrapolated, not a measurement)."""
    rows = []
    for instance in instances:
        if not instance.get("accelerator_count"):
            continue
        gib = gpu_memory_gib(instance.get("accelerator"))
        batch = None if gib is None else fit.largest_batch(gib)
        rows.append({
            "instance": instance["name"], "accelerator": instance.get("accelerator"), "gpu_memory_gib": gib,
            "batch_per_gpu": batch,
            "extrapolated": bool(batch and not min(fit.batches) <= batch <= max(fit.batches)),
        })  # fmt: skip
    return rows


def measure_peak_bytes(model: str, batch: int, device: str = "cpu", num_classes: int | None = None,
                       input_shape: tuple[int, ...] | None = None) -> int:  # fmt: skip
    """Peak memory of two training steps at `batch`, in a process of its own (memprobe.py)."""
    shape = ",".join(str(v) for v in input_shape) if input_shape else "-"
    with tempfile.TemporaryDirectory(prefix="stash-memprobe-") as folder:
        # the reply comes in a file: the user's model shares the probe's stdout and may print anything there
        reply = Path(folder) / "peak.json"
        # -P: no current folder on the probe's sys.path (a json.py there would run in place of the standard
        # one); Stash comes from PYTHONPATH, a user's model file from its path
        command = [sys.executable, "-P", "-m", "stash_core.measure.memprobe", model, str(batch), device,
                   "-" if num_classes is None else str(num_classes), shape, str(reply)]  # fmt: skip
        path = os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
                env={**os.environ, **CPU_MALLOC_ENV, "PYTHONPATH": path},
            )
        except subprocess.TimeoutExpired:
            took = f"took over {PROBE_TIMEOUT_S} s"
            raise UsageError(f"memory probe of {model} at batch {batch} {took}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"memory probe of {model} at batch {batch} on {device} failed: {last}")
        peak = _read_peak(reply)
    if peak is None:
        raise UsageError(
            f"memory probe of {model} at batch {batch} on {device} ended without a readable result "
            "(did the model's code end the process early?)"
        )
    return peak


def _read_peak(reply: Path) -> int | None:
    """The probe's peak in bytes, or None when its reply is missing or not {"peak_bytes": N >= 0}."""
    try:
        peak = json.loads(reply.read_text())["peak_bytes"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return peak if isinstance(peak, int) and not isinstance(peak, bool) and peak >= 0 else None


DEVICE_RE = re.compile(r"cpu|cuda(?::(\d+))?")


def check_device(device: str) -> None:
    """Refuse a device that is not cpu or cuda[:N], or a GPU that this machine's torch cannot use."""
    match = DEVICE_RE.fullmatch(device) if isinstance(device, str) else None
    if match is None:
        raise UsageError(f"device {device!r}: give cpu or cuda[:N]")
    if device == "cpu":
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(match.group(1) or 0)
    if index >= count:
        have = "no CUDA GPU torch can use" if count == 0 else f"{count} CUDA GPU(s), cuda:0..cuda:{count - 1}"
        raise UsageError(f"device {device}: this machine has {have}")


def profile_memory(model: str, batches: list[int], device: str = "cpu", num_classes: int | None = None,
                   input_shape: tuple[int, ...] | None = None) -> MemoryFit:  # fmt: skip
    """Measure each batch size in its own process and fit eq. 10."""
    if len(set(batches)) < MIN_BATCHES:
        raise UsageError(f"give {MIN_BATCHES} or more different batch sizes (two always fit a line)")
    from stash_core.zoo.build import describe_model

    describe_model(model, num_classes, input_shape)  # an unknown model or shape, before any probe starts
    check_device(device)
    peaks = [measure_peak_bytes(model, b, device, num_classes, input_shape) for b in batches]
    return fit_memory(batches, peaks, device)
