"""The jobs a simulated cluster receives, and how much slower each runs when spread over machines.

A trace is a CSV with columns job_id, num_gpu, submit_time (s) and either duration (s, run time when
consolidated) or iterations with iteration_s; optional: model_name, network_slowdown, grad_bytes and
estimate_s (the user's estimate of the duration, which the scheduler may use; the duration it may not).
These are the Tiresias simulator's column names, so its traces load as they are; formats.py reads others.

Network sensitivity is the slowdown of an iteration when the job's workers are spread over machines
under one switch: (t1 + network stall) / t1, with t1 the iteration on one machine. It comes from, in order:
the trace's network_slowdown column; Stash's own measurements of the model (latest completed multi-node
profile in the database: 1 + network_s / (compute_s + interconnect_s)); Blox's placement penalties
(res50 0.9, res18 0.8, alexnet 0.6, shufflenet 0.7, others 0.8 of the speed). Each job says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.generate import ARRIVALS, arrival_times
from stash_core.store.reads import network_shares, profiled_iteration_s
from stash_core.terminal import unsafe_character
from stash_core.zoo_names import canonical_model

# Blox (msr-fiddle/blox): speed multiplier when a job spans machines; slowdown = 1 / multiplier.
BLOX_SPEED = {"resnet50": 0.9, "resnet18": 0.8, "alexnet": 0.6, "shufflenet": 0.7}
BLOX_DEFAULT_SPEED = 0.8

# Bounds on a trace's values (docs/traces.md): beyond them the metrics lose their precision or overflow.
YEAR_S = 365 * 86400.0
MAX_DURATION_S = 10 * YEAR_S  # a job's duration, iterations x iteration_s, estimate_s
MAX_SPAN_S = 100 * YEAR_S  # last submit_time - first
MAX_ABS_SUBMIT_S = 1e12  # |submit_time|: seconds keep sub-millisecond precision below it
MAX_GPUS = 1_000_000  # num_gpu of one job
MAX_GRAD_BYTES = 1e15  # gradient bytes per iteration
MAX_SLOWDOWN = 1000.0  # network_slowdown
MIN_ITERATION_S = 1e-6  # duration / iterations: no training iteration is shorter; the link model's terms
# overflow a far shorter one


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: what it asks, when, how long it runs consolidated, how network-sensitive it is."""

    job_id: str
    gpus: int
    submit_s: float
    duration_s: float  # run time with the consolidated placement
    model: str | None
    slowdown: float  # iteration time spread over machines (one switch) / consolidated
    slowdown_source: str  # "trace", "measured", or "blox default"
    grad_bytes: float | None = None  # gradient bytes per iteration (trace column grad_bytes), if given
    estimate_s: float | None = None  # the user's estimate of the duration (trace column estimate_s)
    iteration_s: float | None = None  # consolidated iteration: duration / iterations, when the trace says


MAX_JOB_ID_CHARS = 256  # a trace's job ids are short; a longer one is not an id


def jobs_from_frame(frame: pd.DataFrame, db_path: Path | None = None, what: str = "trace") -> list[TraceJob]:
    missing = [c for c in ("job_id", "num_gpu", "submit_time") if c not in frame.columns]
    if missing:
        raise UsageError(f"{what}: missing column(s) {', '.join(missing)}")
    per_iteration = "iteration_s" in frame.columns or (db_path is not None and "model_name" in frame.columns)
    if "duration" not in frame.columns and not ("iterations" in frame.columns and per_iteration):
        raise UsageError(
            f"{what}: give a duration column, or iterations and iteration_s (or model_name and a database "
            "with profiles of the models)"
        )
    if frame.empty:
        raise UsageError(f"{what} has no jobs")
    measured = measured_slowdowns(db_path) if db_path is not None else {}
    profiled = profiled_iteration_s(db_path) if db_path is not None else {}
    jobs, rows_of = [], {}
    for number, row in enumerate(frame.to_dict(orient="records"), start=1):
        if not _present(row["job_id"]):
            raise UsageError(f"{what}: job {number} (by position) has no job_id")
        job_id = str(row["job_id"])
        character = unsafe_character(job_id)
        if character:
            raise UsageError(
                f"{what}: job {number} (by position): its job_id holds the control character {character}"
            )
        if len(job_id) > MAX_JOB_ID_CHARS:
            raise UsageError(
                f"{what}: job {number} (by position): its job_id is longer than {MAX_JOB_ID_CHARS} characters"
            )
        if job_id in rows_of:
            raise UsageError(f"{what}: job id {job_id} is given twice (jobs {rows_of[job_id]} and {number})")
        rows_of[job_id] = number
        name = f"{what}: job {job_id}"
        gpus = _positive(row["num_gpu"], f"{name} num_gpu", whole=True, most=MAX_GPUS)
        submit_s = _number(row["submit_time"], f"{name} submit_time")
        if abs(submit_s) > MAX_ABS_SUBMIT_S:
            raise UsageError(
                f"{name} submit_time must be within ±{MAX_ABS_SUBMIT_S:.0e} s, got {submit_s!r}"
            )
        # the name the model's profiles are stored under: a trace's ResNet50 is the zoo's resnet50
        model = canonical_model(str(row["model_name"])) if _present(row.get("model_name")) else None
        character = unsafe_character(model) if model is not None else None
        if character:  # shown in the jobs CSV and the page, as the job_id is
            raise UsageError(f"{what}: job {job_id}: its model_name holds the control character {character}")
        duration_s = _duration(row, name, profiled.get(model) if model is not None else None,
                               _no_profile(model, db_path))  # fmt: skip
        if (submit_s + duration_s) - submit_s < duration_s / 2:  # lost in the time it is added to
            raise UsageError(
                f"{name} duration {duration_s!r} s is below the resolution of a time near its submit_time "
                f"{submit_s!r} s"
            )
        slowdown, source = _slowdown(row, model, measured, name)
        grad_bytes = (
            _positive(row["grad_bytes"], f"{name} grad_bytes", most=MAX_GRAD_BYTES)
            if _present(row.get("grad_bytes"))
            else None
        )
        estimate_s = (
            _positive(row["estimate_s"], f"{name} estimate_s", most=MAX_DURATION_S)
            if _present(row.get("estimate_s"))
            else None
        )
        if _present(row.get("iteration_s")):  # checked also where the duration wins over it
            _positive(row["iteration_s"], f"{name} iteration_s", most=MAX_DURATION_S)
        iterations = row.get("iterations")
        per_run = _positive(iterations, f"{name} iterations") if _present(iterations) else None
        iteration_s = None if per_run is None else duration_s / per_run
        if iteration_s is not None and iteration_s < MIN_ITERATION_S:
            raise UsageError(
                f"{name} iterations {_as_written(iterations)} make an iteration of {iteration_s:.3g} s "
                f"(duration / iterations); an iteration takes at least {MIN_ITERATION_S:g} s"
            )
        jobs.append(TraceJob(job_id, int(gpus), submit_s, duration_s, model, slowdown, source, grad_bytes,
                             estimate_s, iteration_s))  # fmt: skip
    jobs.sort(key=lambda job: (job.submit_s, job.job_id))
    late = jobs[-1]
    if late.submit_s - jobs[0].submit_s > MAX_SPAN_S:
        raise UsageError(
            f"{what}: job {late.job_id} submit_time {late.submit_s!r} is more than 100 years after the first "
            f"job's ({jobs[0].submit_s!r})"
        )
    return jobs


def _duration(row: dict, name: str, profiled_s: float | None = None, no_profile: str = "") -> float:
    """The row's duration, else iterations x iteration_s, else iterations x `profiled_s` (its model's
    iteration in a Stash profile; `no_profile` says why there is none); finite and at most MAX_DURATION_S."""
    if "duration" in row and (_present(row["duration"]) or not _present(row.get("iterations"))):
        return _positive(row["duration"], f"{name} duration", most=MAX_DURATION_S)
    iterations = _positive(row.get("iterations"), f"{name} iterations")
    if not _present(row.get("iteration_s")) and profiled_s is None:
        raise UsageError(f"{name} gives neither duration nor iteration_s{no_profile}")
    if _present(row.get("iteration_s")):
        iteration_s = _positive(row.get("iteration_s"), f"{name} iteration_s")
    else:
        iteration_s = profiled_s
    duration_s = iterations * iteration_s
    if not duration_s <= MAX_DURATION_S:  # also inf
        raise UsageError(
            f"{name} iterations x iteration_s must be at most {MAX_DURATION_S:.0f} s (10 years), got "
            f"{_as_written(row.get('iterations'))} x {_as_written(iteration_s)}"
        )
    return duration_s


def _no_profile(model: str | None, db_path: Path | None) -> str:
    """Why a job without duration and iteration_s has no iteration from a Stash profile (docs/traces.md)."""
    if model is None:
        return ", nor a model_name whose completed one-node profile in the database gives its iteration time"
    shown = model if model.isprintable() and len(model) <= 60 else repr(model[:60])
    if db_path is None:
        return f", and no database is read to take the iteration time of {shown} from"
    return (
        f", and the database {db_path} holds no completed one-node profile of {shown} to take its iteration "
        "time from"
    )


def measured_slowdowns(db_path: Path) -> dict[str, float]:
    """Per model: 1 + network stall / (compute + interconnect) of its latest completed multi-node profile."""
    return {model: 1.0 + max(0.0, share) for model, share in network_shares(db_path).items()}


def synthetic_trace(
    jobs: int, seed: int, models: list[str], mean_gap_s: float = 120.0, arrivals: str = "poisson"
) -> pd.DataFrame:
    """A reproducible trace: GPU demands 1-16 skewed small, log-normal durations (median 1800 s, sigma 1),
    arrivals as `arrivals` says (generate.py; the same jobs whatever the arrivals)."""
    if jobs < 1:
        raise UsageError("a synthetic trace needs at least one job")
    if arrivals not in ARRIVALS:
        raise UsageError(f"unknown arrivals {arrivals!r}: choose {', '.join(ARRIVALS)}")
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8, 16], size=jobs, p=[0.35, 0.2, 0.2, 0.15, 0.1])
    gaps_s = rng.exponential(mean_gap_s, size=jobs)
    return pd.DataFrame(
        {
            "job_id": [f"j{i:04d}" for i in range(jobs)],
            "num_gpu": gpus,
            "submit_time": arrival_times(gaps_s, arrivals, np.random.default_rng([seed, 1]), mean_gap_s),
            "duration": np.round(rng.lognormal(mean=math.log(1800), sigma=1.0, size=jobs), 1),
            "model_name": rng.choice(models, size=jobs),
        }
    )


def _slowdown(row: dict, model: str | None, measured: dict[str, float], what: str) -> tuple[float, str]:
    if _present(row.get("network_slowdown")):
        value = _number(row["network_slowdown"], f"{what} network_slowdown")
        if value < 1:
            raise UsageError(f"{what} network_slowdown must be >= 1 (spread is never faster), got {value}")
        if value > MAX_SLOWDOWN:
            raise UsageError(f"{what} network_slowdown must be at most {MAX_SLOWDOWN:g}, got {value}")
        return value, str(row["slowdown_source"]) if _present(row.get("slowdown_source")) else "trace"
    if model is not None and model in measured:
        return measured[model], "measured"
    speed = next((s for key, s in BLOX_SPEED.items() if model and model.lower().startswith(key)), None)
    return 1.0 / (speed or BLOX_DEFAULT_SPEED), "blox" if speed else "blox default"


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != ""


def _number(value: object, what: str) -> float:
    if not _present(value):  # an empty cell or a short row (read as missing, not as the text "nan")
        raise UsageError(f"{what} is empty")
    try:
        if isinstance(value, str) and "_" in value:  # float() reads "1_000" as 1000; a trace does not
            raise UsageError(f"{what} must be a number, got {value!r}")
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, got {_as_written(value)}") from None
    if not math.isfinite(number):
        raise UsageError(f"{what} must be a finite number, got {_as_written(value)}")
    return number


def _positive(value: object, what: str, whole: bool = False, most: float | None = None) -> float:
    number = _number(value, what)
    if number <= 0 or (whole and number != int(number)):
        kind = "whole number" if whole else "number"
        raise UsageError(f"{what} must be a positive {kind}, got {_as_written(value)}")
    if most is not None and number > most:
        years = f" s ({most / YEAR_S:.0f} years)" if most == MAX_DURATION_S else ""
        raise UsageError(f"{what} must be at most {most:.15g}{years}, got {_as_written(value)}")
    return number


def _as_written(value: object) -> str:
    """A cell in a message: a number as the trace wrote it (1e+30, not '1e+30'), anything else quoted."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return repr(value)
        return value.strip()
    return repr(value)
