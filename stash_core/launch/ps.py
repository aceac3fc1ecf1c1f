"""Launch asynchronous parameter-server trainings on this machine (a PS and its workers over loopback).

One torchrun launch of N + 1 processes of measure/ps_worker.py (rank 0 the PS, N the largest worker count)
runs one training per worker count in turn; every rank in a count prints one RESULT line, returned here
grouped by the count.
"""

from __future__ import annotations

import sys
from collections import defaultdict

from stash_core.errors import MeasurementError
from stash_core.launch.local import run_local
from stash_core.measure.protocol import parse

START_S = 120.0  # allowance for torchrun and N + 1 torch imports on a busy machine


def ps_argv(counts: list[int], model: str, batch: int, duration_s: float, num_classes: int | None = None,
            input_shape: str | None = None) -> list[str]:  # fmt: skip
    argv = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(max(counts) + 1), "--max-restarts", "0",
        "-m", "stash_core.measure.ps_worker",
        "--model", model, "--batch", str(batch), "--duration-s", f"{duration_s:g}",
        "--counts", ",".join(str(n) for n in counts),
    ]  # fmt: skip
    if num_classes is not None:
        argv += ["--num-classes", str(num_classes)]
    if input_shape:
        argv += ["--input-shape", input_shape]
    return argv


def run_ps_training(counts: list[int], model: str, batch: int, duration_s: float,
                    num_classes: int | None = None,
                    input_shape: str | None = None) -> dict[int, list[dict]]:  # fmt: skip
    """Per worker count: the RESULT payloads of the PS and its workers."""
    if not counts or min(counts) < 1:
        raise MeasurementError("a parameter-server training needs at least one worker")
    results: dict[int, list[dict]] = defaultdict(list)
    errors: list[str] = []

    def on_line(line: str) -> None:
        message = parse(line)
        if message is None:
            return
        kind, payload = message
        if kind == "RESULT" and isinstance(payload, dict):
            results[int(payload.get("workers", 0))].append(payload)
        elif kind == "ERROR":
            errors.append(str(payload))

    argv = ps_argv(counts, model, batch, duration_s, num_classes, input_shape)
    tail = run_local(argv, on_line, timeout_s=START_S + len(counts) * (2 * duration_s + 10))
    short = [n for n in counts if len(results.get(n, [])) != n + 1]
    if tail or errors or short:
        detail = (errors or [_reason(tail)])[-1]
        raise MeasurementError(f"parameter-server training ({max(counts)} workers) failed: {detail}")
    return {n: results[n] for n in counts}


def _reason(tail: list[str]) -> str:
    """The worker's own error among torchrun's report (its last 'SomethingError: ...' line)."""
    found = [line for line in tail if "Error:" in line and "ChildFailedError" not in line]
    if found:
        return found[-1].split("]:", 1)[-1].strip()
    return next((line for line in reversed(tail) if line.strip(" =")), "a process printed no result")
