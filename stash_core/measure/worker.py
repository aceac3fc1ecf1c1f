"""Entry point of one worker process of one run (launched by torchrun, one per GPU or CPU worker).

    python -m torch.distributed.run ... -m stash_core.measure.worker --job-json '{...}'

The job travels on the command line (--job-json, or --job-zb64 for a zlib-compressed, base64 one
when it is large), so that it reaches workers on remote hosts too; --job FILE reads it from a file.

Every rank runs the same timed loop. Every few iterations the ranks all-reduce the times of
the iterations since the last check, so each rank holds the job's time per iteration (the mean
over the ranks: rank_sync.py) and all ranks take the same decision to stop. Rank 0 prints
progress and, at the end, the result as one line on stdout:

    STASH-PROGRESS {...}      STASH-RESULT {...}      STASH-ERROR message

After the timed loop a job may ask for a probe (bandwidth and latency through the same process
group, see probe_worker.py); on remote hosts a job may also ask rank 0 to sample telemetry and
the first worker of each machine to put the data set into (or out of) that machine's page cache.
"""

from __future__ import annotations

import datetime
import itertools
import os
import socket
import time

import torch
import torch.distributed as dist

from stash_core.analysis.stats import converged, mser_truncation
from stash_core.data import pagecache
from stash_core.data.jpeg_dataset import ImageFolderDataset
from stash_core.data.loader import LOADER_CORES_ENV, make_loader
from stash_core.data.transforms import TrainTransform
from stash_core.errors import StashError
from stash_core.measure import protocol
from stash_core.measure.error_line import error_line
from stash_core.measure.rank_sync import (
    MIN_WARMUP_ITERATIONS,
    agree,
    gathered_steps,
    report_progress,
    warmup_count,
)
from stash_core.measure.stacks import dump_on_signal
from stash_core.measure.timed_loop import PARTS, StepTimes, losses_finite, make_clock, run_steps
from stash_core.measure.worker_job import WorkerJob, read_worker_job
from stash_core.zoo import build_model, loss_fn, make_optimizer
from stash_core.zoo.build import ModelForwardError
from stash_core.zoo.compiler_guards import compiler_unimported

FIRST_CHECK_AFTER = 10


def first_chunk(fixed: int | None, max_iterations: int | None = None) -> int:
    """Steps before the first check: FIRST_CHECK_AFTER, or fewer where a fixed count needs fewer (the warm-up
    always dropped, then the count asked for: `--iterations 3` runs 5 steps, not 10), or where the launch's
    cap is smaller (never below the warm-up and two steps: a figure needs them)."""
    if fixed is not None:
        return max(1, min(FIRST_CHECK_AFTER, MIN_WARMUP_ITERATIONS + fixed))
    if max_iterations is None:
        return FIRST_CHECK_AFTER
    return min(FIRST_CHECK_AFTER, max(max_iterations, MIN_WARMUP_ITERATIONS + 2))


UNUSED_PARAMETERS = (
    "a step's loss did not use every trainable parameter of the model, and DDP (which Stash wraps the model "
    "in for more than one worker) needs every one in every step's loss: freeze those it never uses "
    "(requires_grad_(False)) or leave them out of the model; for a model that uses some only on some steps "
    "(a branch taken by chance or by input) give --find-unused-parameters, as its own training must"
)


def error_text(error: BaseException, finding_unused: bool = False) -> str:
    """One line for the launcher; DDP's advice to pass an argument the user cannot (Stash makes the DDP)
    becomes what they can do, unless the job already passes it (`finding_unused`: DDP's words are then
    about something else, such as a parameter made ready twice). Stash's own error is its sentence, without
    its class's name."""
    if isinstance(error, ModelForwardError):  # the model's own code raised on this rank: not the shape
        return f"model {error.ref} raised {error.cause}"
    if "find_unused_parameters" in str(error) and not finding_unused:
        return UNUSED_PARAMETERS
    text = error_line(error)  # (a data loader process's Stash error is re-raised as the same class)
    return text.removeprefix(f"{type(error).__name__}: ") if isinstance(error, StashError) else text


def main(argv: list[str] | None = None) -> int:
    job = read_worker_job(argv)
    rank = int(os.environ.get("RANK", "0"))
    if job.get("dump_stacks"):  # the launcher's hang watch asks for this rank's stacks before it stops it
        dump_on_signal(rank)
    sampler = None
    try:
        if job.get("telemetry") and rank == 0:
            from stash_core.measure.telemetry import TelemetrySampler

            sampler = TelemetrySampler().start()
        result = run_job(job, rank)
        if sampler is not None:
            result["telemetry"] = sampler.stop()
            sampler = None
    except Exception as error:  # noqa: BLE001 - reported as one line to the launcher
        said = error_text(error, bool(job.get("find_unused_parameters")))
        protocol.emit("ERROR", f"rank {rank} ({socket.gethostname()}): {said}")
        return 1
    finally:
        if sampler is not None:
            sampler.stop()
    if rank == 0:
        protocol.emit("RESULT", result)
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def run_job(job: WorkerJob, rank: int) -> dict:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.manual_seed(job["seed"] + rank)
    pin_to_cores(job, local_rank)
    torch.set_num_threads(job["threads_per_worker"])
    device = torch.device(f"cuda:{local_rank}" if job["device"] == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world_size > 1:
        # Launched across machines, the launcher's short timeout bounds every collective too, so a
        # vanished peer ends the run in seconds, not after torch's 30-minute default.
        timeout_s = int(os.environ.get("STASH_RDZV_TIMEOUT_S") or job.get("pg_timeout_s", 120))
        dist.init_process_group(backend=job["backend"], timeout=datetime.timedelta(seconds=timeout_s))
    shape = tuple(job["input_shape"]) if job.get("input_shape") else None
    model, info = build_model(job["model"], num_classes=job.get("num_classes"), input_shape=shape)
    model = model.to(device)
    # DDP and the optimizer reach for torch's compiler, which nothing here uses: on the CPU, where its import
    # (2-3 s of CPU at every launch) is not paid in the launcher either, a stand-in serves them. On a GPU,
    # workers start anew and import it as torch does. A model whose factory loaded it keeps the real one.
    with compiler_unimported(when=device.type == "cpu"):
        return train(job, model, info, device, rank, world_size, local_rank)


def pin_to_cores(job: WorkerJob, local_rank: int) -> None:
    """Keep this worker on its own cores (engine/phase.worker_cores) before torch starts its threads, so
    that every launch of every run places its workers alike and none moves onto a peer's core."""
    cores = job.get("cpu_cores")
    if cores and local_rank < len(cores) and hasattr(os, "sched_setaffinity"):
        # The data loader's processes (forked from here) go back to every core (data/loader.py), as the
        # loaders of a training run are free to.
        os.environ[LOADER_CORES_ENV] = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        os.sched_setaffinity(0, cores[local_rank])


def train(
    job: WorkerJob, model, info, device: torch.device, rank: int, world_size: int, local_rank: int
) -> dict:
    """The timed loop of the built model (DDP across ranks), then the probe a job asks for: the result."""
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None,
            find_unused_parameters=bool(job.get("find_unused_parameters")),
        )  # fmt: skip
    model.train()
    optimizer = make_optimizer(model, info.kind)
    batches, dataset = make_batches(job, info, device, rank, world_size)
    clock = make_clock(device)
    if job.get("paired") and world_size > 1:  # R0 and R1 in one launch (engine/paired.py)
        from stash_core.measure.paired_loop import run_paired

        result = run_paired(job, model, optimizer, loss_fn(info), batches, device, clock, rank, world_size)
    else:
        times = StepTimes()
        step_s: list[float] = []
        stop_reason = run_until_done(
            job, model, optimizer, loss_fn(info), batches, device, times, step_s, clock, rank
        )
        result = summarise_ranks(job, times, step_s, stop_reason, world_size, dataset, device)
    if rank == 0:  # the launcher's hang watch stands down: the probe has an allowance of its own
        protocol.emit("LOOP_END", {"phase": job["phase"], "stop_reason": result["stop_reason"]})
    result["resident_fraction_start"] = getattr(batches, "resident_fraction_start", None)
    if job.get("probe") and world_size > 1:
        from stash_core.measure.probe_worker import run_probe_suite

        del model, optimizer  # the probe's buffers may be large
        result["probe"] = run_probe_suite(job["probe"], device)
    return result


def make_batches(job: WorkerJob, info, device: torch.device, rank: int, world_size: int):
    """An endless iterator of (inputs, targets): the same on-device batch, or real data epochs; and the data
    set they come from (None for the synthetic batch)."""
    if job["data"] == "synthetic":
        from stash_core.zoo import synthetic_batch

        batch = synthetic_batch(info, job["batch_size"], device, seed=job["seed"])
        return itertools.repeat(batch), None

    dataset = open_dataset(job, info)
    resident_fraction = set_cache_state(job, dataset.files, device, world_size)
    loader = make_loader(
        dataset,
        batch_size=job["batch_size"],
        loader_workers=job["loader_workers"],
        rank=rank,
        world_size=world_size,
        pin_memory=device.type == "cuda",
        seed=job["seed"],
    )

    def epochs():
        for epoch in itertools.count():
            sampler = getattr(loader, "sampler", None)
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            yield from loader

    return _Batches(epochs(), resident_fraction), dataset


class _Batches:
    """An iterator of batches that also remembers the page-cache state measured before it started."""

    def __init__(self, iterator, resident_fraction_start: float | None) -> None:
        self.iterator = iterator
        self.resident_fraction_start = resident_fraction_start

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.iterator)


def set_cache_state(job: WorkerJob, files: list, device: torch.device, world_size: int) -> float | None:
    """On remote hosts: the first worker of each machine makes the data set resident (cached run) or
    evicts it (cold run) in its machine's page cache; returns the worst resident fraction over machines."""
    action = job.get("cache_action")
    if action not in ("resident", "evict"):
        return None

    fraction = 0.0
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        if not files:
            raise FileNotFoundError(f"data set {job['dataset']} has no files on {socket.gethostname()}")
        if action == "resident":
            pagecache.make_resident(files)
        else:
            pagecache.evict(files)
        fraction = pagecache.resident_fraction(files)
    if world_size <= 1:
        return fraction
    # The worst machine: the least cached for a cached run, the most cached for a cold one.
    leaders = torch.tensor([fraction, -fraction if action == "resident" else fraction], device=device)
    if int(os.environ.get("LOCAL_RANK", "0")) != 0:
        leaders = torch.tensor([float("-inf"), float("-inf")], dtype=leaders.dtype, device=device)
    dist.all_reduce(leaders, op=dist.ReduceOp.MAX)
    return float(-leaders[1].item()) if action == "resident" else float(leaders[1].item())


def open_dataset(job: WorkerJob, info):
    evict = job["data"] == "cold"
    if info.kind == "tokens":
        from stash_core.data.text_dataset import TextFolderDataset

        return TextFolderDataset(job["dataset"], info.input_shape[0], info.vocab_size, evict_after_read=evict)

    transform = TrainTransform(output_hw=tuple(info.input_shape[1:]))
    dataset = ImageFolderDataset(job["dataset"], transform, evict_after_read=evict)
    exclude = set(job.get("exclude_files") or [])
    if exclude:
        keep = [i for i, path in enumerate(dataset.files) if str(path) not in exclude]
        dataset.files = [dataset.files[i] for i in keep]
        dataset.labels = [dataset.labels[i] for i in keep]
    return dataset


def run_until_done(
    job: WorkerJob, model, optimizer, loss, batches, device, times, step_s, clock, rank
) -> str:
    """Step in chunks; between chunks, agree on the job's step times and decide whether to stop."""
    fixed = job.get("iterations")
    target = job["target_relative_ci"]
    deadline = time.monotonic() + job["max_phase_s"]
    chunk = first_chunk(fixed, job["max_iterations"])
    while True:
        run_steps(model, optimizer, loss, batches, device, chunk, times, clock)
        # The ranks' clocks start apart (each scans its data first), so the time limit is agreed on with the
        # times: a rank leaving alone would leave the others waiting in their next step's collective.
        chunk_s, past_deadline = agree(times.iteration_s[-chunk:], time.monotonic() > deadline, device)
        step_s.extend(chunk_s)
        series = step_s[MIN_WARMUP_ITERATIONS:]
        kept = len(series) - mser_truncation(series)
        if rank == 0:
            report_progress(job, series, kept, target)
        if fixed is not None:
            if kept >= fixed:
                return "fixed"
        elif converged(series, target):
            return "converged"
        if len(step_s) >= job["max_iterations"]:
            return "max_iterations"
        if past_deadline:
            return "max_time"
        # Check less often as the run grows: the check costs O(n) and the decision changes slowly.
        chunk = max(FIRST_CHECK_AFTER, len(step_s) // 5)
        if fixed is not None:
            chunk = max(1, min(chunk, fixed - kept))
        chunk = min(chunk, job["max_iterations"] - len(step_s))


def summarise_ranks(
    job: WorkerJob, times: StepTimes, step_s, stop_reason, world_size, dataset, device
) -> dict:
    """Gather every rank's timings to rank 0: the job's time per iteration and its parts (means over the
    ranks), the slowest rank of each iteration, and skew."""
    per_rank, steps = gathered_steps(times, world_size, device)
    warmup = warmup_count(step_s, job.get("iterations") if stop_reason == "fixed" else None)
    skew = steps.pop("skew_s")
    return {
        "phase": job["phase"],
        "world_size": world_size,
        "warmup_iterations": warmup,
        "stop_reason": stop_reason,
        "samples": {name: values[warmup:] for name, values in steps.items()},
        "rank_skew_s": sum(skew[warmup:]) / max(len(skew) - warmup, 1),
        "bad_files": corrupt_reads(dataset, device),
        "loss_finite": losses_finite([times], device),
        "ranks": rank_summaries(per_rank[:, :, warmup:], world_size),
    }


def rank_summaries(per_rank: torch.Tensor, world_size: int) -> list[dict]:
    """Every rank's own means over the kept iterations, with the machine it ran on."""
    hosts = [(socket.gethostname(), int(os.environ.get("GROUP_RANK", "0")))]
    if world_size > 1:
        hosts = [None] * world_size
        dist.all_gather_object(hosts, (socket.gethostname(), int(os.environ.get("GROUP_RANK", "0"))))
    means = per_rank.mean(dim=2) if per_rank.shape[2] else torch.full(per_rank.shape[:2], float("nan"))
    names = ("iteration_s", *PARTS)
    return [
        {
            "rank": rank,
            "hostname": host,
            "node": node,
            **{name: float(means[rank, i]) for i, name in enumerate(names)},
        }
        for rank, (host, node) in enumerate(hosts)
    ]


def corrupt_reads(dataset, device: torch.device) -> int | None:
    """Reads of undecodable images that another sample stood in for, summed over the ranks (every rank
    calls it); None where the data set does not count them (synthetic batches, text)."""
    count = getattr(dataset, "corrupt_reads", None)  # None on every rank alike: they run the same job
    if count is None or not dist.is_initialized() or dist.get_world_size() == 1:
        return count
    total = torch.tensor([float(count)], dtype=torch.float64, device=device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return int(total.item())


if __name__ == "__main__":
    protocol.start_worker(protocol.WORKER_NAME)
    protocol.end_reported(main())
