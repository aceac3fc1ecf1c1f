"""Synthetic workloads: when jobs arrive, and a Philly-like trace.

Arrivals (`--arrivals`):
  poisson  exponential gaps of mean `mean_gap_s` (continuous arrivals: makespan is mostly the last arrival)
  batch    every job at time 0 ("training all jobs": makespan is how fast the cluster drains the batch)
  burst    bursts of BURST_JOBS jobs at one instant, exponential gaps of BURST_JOBS x `mean_gap_s` between
           bursts (the same mean rate as poisson)
A trace's own arrivals can be replaced by `batch` too (all its jobs submitted at once).

Philly-like trace (`--generator philly`), parameters below, after the Philly analysis of Jeon et al.
(ATC 2019): most jobs ask one GPU, a few ask 16 or 32 and hold most of the GPU time; run times are heavy
tailed (minutes to weeks); arrivals follow the working day. No figure here is fitted to the Philly log
itself (117,325 jobs; its cluster_job_log reads with --trace-format philly).
  GPUs            1, 2, 4, 8, 16, 32 with probabilities PHILLY_GPU_SHARES
  duration        log-normal, median PHILLY_MEDIAN_S, sigma PHILLY_SIGMA, clipped to [60 s, 30 days]
  arrivals        Poisson, rate x (1 + DIURNAL_AMPLITUDE x sin(2 pi t / 1 day)), mean gap `mean_gap_s`
                  (thinning: candidates at the peak rate, each kept with the rate's share of the peak)
  model           uniform over PHILLY_MODELS; its gradient bytes (fabric.GRAD_BYTES) and an assumed
                  consolidated iteration time (ITERATION_S, typical of one V100 node, not measured here)
                  give grad_bytes and iterations, so that its communication and what backward hides
                  follow its size (fabric.py); network_slowdown is left to Blox's penalties by model
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.defaults import ARRIVAL_KINDS
from stash_core.sched.fabric import grad_bytes_of

ARRIVALS = ARRIVAL_KINDS
BURST_JOBS = 20
PHILLY_GPUS = (1, 2, 4, 8, 16, 32)
PHILLY_GPU_SHARES = (0.50, 0.12, 0.12, 0.14, 0.08, 0.04)
PHILLY_MEDIAN_S = 1800.0
PHILLY_SIGMA = 1.6
PHILLY_MIN_S, PHILLY_MAX_S = 60.0, 30 * 86400.0
DIURNAL_AMPLITUDE = 0.6
DAY_S = 86400.0
# assumed consolidated seconds per iteration (a stated assumption, not a measurement)
ITERATION_S = {"resnet50": 0.20, "resnet18": 0.10, "vgg16": 0.30, "alexnet": 0.08, "bert_base": 0.30,
               "bert_large": 0.80, "gpt2": 0.35, "inception_v3": 0.25, "shufflenet": 0.08}  # fmt: skip
PHILLY_MODELS = tuple(ITERATION_S)


def arrival_times(
    gaps_s: np.ndarray, arrivals: str, rng: np.random.Generator, mean_gap_s: float
) -> np.ndarray:
    """Submit times for `arrivals` from the Poisson gaps already drawn (the other columns stay the same)."""
    if arrivals == "poisson":
        return np.round(np.cumsum(gaps_s), 1)
    if arrivals == "batch":
        return np.zeros(len(gaps_s))
    if arrivals == "burst":
        bursts = math.ceil(len(gaps_s) / BURST_JOBS)
        starts = np.round(np.cumsum(rng.exponential(BURST_JOBS * mean_gap_s, size=bursts)), 1)
        return np.repeat(starts, BURST_JOBS)[: len(gaps_s)]
    raise UsageError(f"unknown arrivals {arrivals!r}: choose {', '.join(ARRIVALS)}")


def diurnal_times(jobs: int, mean_gap_s: float, rng: np.random.Generator) -> np.ndarray:
    """Poisson arrivals whose rate follows the day (thinning), `mean_gap_s` apart on average."""
    peak_gap_s = mean_gap_s / (1 + DIURNAL_AMPLITUDE)
    times: list[float] = []
    t = 0.0
    while len(times) < jobs:
        candidates = t + np.cumsum(rng.exponential(peak_gap_s, size=2 * (jobs - len(times)) + 16))
        keep = rng.random(len(candidates)) < (
            1 + DIURNAL_AMPLITUDE * np.sin(2 * np.pi * candidates / DAY_S)
        ) / (1 + DIURNAL_AMPLITUDE)
        times.extend(candidates[keep][: jobs - len(times)].tolist())
        t = float(candidates[-1])
    return np.round(np.array(times), 1)


def philly_like_trace(jobs: int, seed: int, mean_gap_s: float, arrivals: str = "poisson") -> pd.DataFrame:
    """A reproducible Philly-like trace (module docstring); `arrivals` other than poisson replace the
    diurnal submit times."""
    if jobs < 1:
        raise UsageError("a synthetic trace needs at least one job")
    if arrivals not in ARRIVALS:
        raise UsageError(f"unknown arrivals {arrivals!r}: choose {', '.join(ARRIVALS)}")
    rng = np.random.default_rng(seed)
    gpus = rng.choice(PHILLY_GPUS, size=jobs, p=PHILLY_GPU_SHARES)
    duration = np.clip(
        rng.lognormal(math.log(PHILLY_MEDIAN_S), PHILLY_SIGMA, size=jobs), PHILLY_MIN_S, PHILLY_MAX_S
    )
    models = rng.choice(PHILLY_MODELS, size=jobs)
    submit = diurnal_times(jobs, mean_gap_s, rng)
    if arrivals != "poisson":
        submit = arrival_times(np.full(jobs, mean_gap_s), arrivals, rng, mean_gap_s)
    iteration_s = np.array([ITERATION_S[m] for m in models])
    return pd.DataFrame(
        {
            "job_id": [f"p{i:05d}" for i in range(jobs)],
            "num_gpu": gpus,
            "submit_time": submit,
            "duration": np.round(duration, 1),
            "iterations": np.maximum(1, np.round(duration / iteration_s)).astype(int),
            "model_name": models,
            "grad_bytes": [grad_bytes_of(m) for m in models],
        }
    )


def philly_mean_gpu_s() -> float:
    """Expected GPU-seconds of one Philly-like job (for a gap that gives a wanted load); the clipping of
    the log-normal is ignored (it changes the mean by well under 1%)."""
    mean_gpus = sum(g * p for g, p in zip(PHILLY_GPUS, PHILLY_GPU_SHARES, strict=True))
    return mean_gpus * PHILLY_MEDIAN_S * math.exp(PHILLY_SIGMA**2 / 2)
