"""A worker's job on its command line: the JSON that says what one run measures, inline or compressed.

WorkerJob names every key a job may hold; the host writes it (engine/phase.py job_for, engine/script_job.py,
engine/probes.py) and the workers read it (measure/worker.py, script_entry.py, probe_worker.py).
"""

from __future__ import annotations

import argparse
import base64
import json
import zlib
from typing import Any, TypedDict

from stash_core.measure import protocol


class ProbeSettings(TypedDict):
    """The `probe` part of a job: the collectives a run's workers time after it (measure/probe_plan.py)."""

    sizes_bytes: list[int]  # all-reduce message sizes
    p2p_sizes_bytes: list[int]  # send/recv sizes: latency, then bandwidth
    grad_bytes: int | None  # the model's gradients, also timed as one all-reduce
    budget_s_per_size: float
    max_repetitions: int
    max_op_s: float | None  # skip sizes predicted to take longer (a slow link vs. the group's timeout)
    link_gbps: float | None  # the slowest known link between machines (emulated): no prediction faster


class WorkerJob(TypedDict, total=False):
    """What one launch of workers measures. A model's run has the model keys, a script's run the script keys,
    a probe alone only device, backend, threads_per_worker and probe."""

    phase: str  # the run: R0, R1, R1n, R3 or R2
    device: str  # cpu or cuda
    backend: str  # gloo or nccl
    threads_per_worker: int | None  # torch threads of a CPU worker (None: torch's default)
    cpu_cores: list[list[int]] | None  # the cores each local worker is pinned to (None: not pinned)
    data: str  # synthetic (made on the device), cached or cold
    iterations: int | None  # a fixed count of timed iterations (None: until the target or a cap)
    target_relative_ci: float  # stop when the 95% interval of the mean is this share of it
    max_iterations: int
    max_phase_s: float  # the timed loop's cap, seconds
    seed: int
    # a zoo or user model
    model: str
    num_classes: int | None
    input_shape: list[int] | None
    find_unused_parameters: bool  # DDP's: the step's unused parameters found every step
    batch_size: int
    dataset: str | None  # the folder of the run's files (None: synthetic)
    exclude_files: list[str]  # files found unreadable before the run
    loader_workers: int
    # a user's training script
    script: str
    script_args: list[str]
    data_dir: str | None  # the files the script reads (their page-cache state is set per run)
    start_timeout_s: float  # the script's start-up before its first step
    stall_grace_s: float  # how long past the run's time a script may go without a step (default 60 s)
    # set for some runs only
    cache_action: str  # on remote hosts: each machine makes its files resident or evicts them
    telemetry: bool  # rank 0 samples CPU/GPU telemetry (remote runs)
    probe: ProbeSettings
    paired: dict  # R0 and R1 in one launch, in blocks of {"block_steps": n} (measure/paired_loop.py)
    pg_timeout_s: float  # the process group's timeout (default 120 s)
    dump_stacks: bool  # each rank writes its stacks to a file in $TMPDIR on SIGUSR1 (measure/stacks.py)
    protocol_token: str  # marks the workers' protocol lines apart from the code's output (protocol.py)


def encode_worker_job(job: WorkerJob | dict[str, Any]) -> list[str]:
    """Worker arguments carrying `job`: inline JSON, compressed when long (an argument holds <= 128 KiB)."""
    text = json.dumps(job, separators=(",", ":"))
    if len(text) <= 32_000:
        return ["--job-json", text]
    packed = base64.b64encode(zlib.compress(text.encode(), 9)).decode("ascii")
    return ["--job-zb64", packed]


def read_worker_job(argv: list[str] | None = None) -> WorkerJob:
    parser = argparse.ArgumentParser(prog="stash_core.measure")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--job", help="JSON file describing the run")
    source.add_argument("--job-json", help="the job as JSON text")
    source.add_argument("--job-zb64", help="the job as zlib-compressed, base64-encoded JSON")
    args = parser.parse_args(argv)
    if args.job:
        with open(args.job) as handle:
            job = json.load(handle)
    elif args.job_json:
        job = json.loads(args.job_json)
    else:
        job = json.loads(zlib.decompress(base64.b64decode(args.job_zb64)))
    protocol.use_token(job.get(protocol.TOKEN_KEY))  # every line this worker emits carries it
    return job
