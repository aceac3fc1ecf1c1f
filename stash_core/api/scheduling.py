"""`stash_core.simulate_schedule()`: how a shared GPU cluster places network-sensitive jobs, policy by policy
(`stash schedule` and the Schedule page call it).

Each value is checked by the rule of its command-line flag (api/options.py); the simulator (sched/) is
imported inside the function (it loads pandas and numpy).
"""

from __future__ import annotations

import re
from pathlib import Path

from stash_core.api.options import (
    api_options,
    checked,
    choice,
    database,
    required,
    switch,
)
from stash_core.api.results import Schedule
from stash_core.api.schedule_unused import refuse_unused
from stash_core.errors import UsageError
from stash_core.pathargs import db_named_by, path_argument, refuse_overwrite, required_path
from stash_core.sched import defaults
from stash_core.sched_names import SYNTHETIC_TRACE
from stash_core.spec_parse import Number, count, empty_item, positive_real

YEAR_S = 365 * 86400.0
MAX_CLUSTER_GPUS = 1_000_000
# A node is one machine (the largest NVLink domain sold spans 576 GPUs of many): a placement scans each free
# count up to it, and 1,000,000 GPUs in a node took 30 s and 690 MB for 50 jobs.
MAX_GPUS_PER_NODE = 4096
NON_NEGATIVE = Number(0, 1e6, whole=False, what="a number >= 0")
NON_NEGATIVE_YEAR = Number(0, YEAR_S, whole=False, what="a number >= 0")
MAX_SYNTHETIC_SPAN_S = 10 * YEAR_S  # jobs x mean gap: the drawn arrivals stay far inside a trace's 100 years


class TraceTooLarge(UsageError):
    """A trace of more jobs than the caller's max_jobs (a page words it with its own limit)."""

    def __init__(self, jobs: int, most: int) -> None:
        super().__init__(f"the trace has {jobs:,} jobs, more than max_jobs={most:,}")
        self.jobs, self.most = jobs, most


@api_options("simulate_schedule")
def simulate_schedule(
    trace: Path | str | None = None, *, synthetic_jobs: int | None = None, trace_format: str = "auto",
    generator: str | None = None, arrivals: str | None = None, seed: int | None = None,
    mean_gap_s: float | None = None,
    cluster: tuple[int, int, int] | str = (2, 4, 8), policies: list[str] | str | None = None,
    tuning: str | None = None, tune_fraction: float | None = None, delay_s: float | None = None,
    scale: float | None = None, checkpoint_s: float | None = None,
    min_run_s: float | None = None, max_preemptions: int | None = None,
    las_limits_gpu_h: tuple[float, ...] | str | None = None,
    starve_factor: float | None = None, uplink_factor: float | None = None,
    node_gbps: float | None = None, uplink_gbps: float | None = None, oversubscription: float | None = None,
    reference_gbps: float | None = None, out: Path | str | None = None,
    jobs_csv: Path | str | None = None, no_store: bool = False, max_jobs: int | None = None,
    trace_label: str | None = None,
    db: Path | str | None = None,
) -> Schedule:  # fmt: skip
    """Simulate how a shared GPU cluster places network-sensitive jobs, policy by policy (`stash schedule`);
    the result file sim-*.json is written to `out` and stored in the database.

    Args:
        trace: a trace file (docs/traces.md), or None with `synthetic_jobs`.
        synthetic_jobs: generate a trace of this many jobs (with `generator`, `arrivals`, `seed`,
            `mean_gap_s`) instead of reading one.
        trace_format: "auto" (told from the file's columns) or the trace's format.
        cluster: (switches, nodes per switch, GPUs per node), or "2x4x8"; at most 4,096 GPUs a node and
            1,000,000 in all.
        policies: the policies to compare (default all: fifo, sjf, las, consolidate, delay, ...).
        tuning: "split" (the default; tuned on the first `tune_fraction` of the jobs, default 0.3), "online"
            or "given" (with `delay_s`, `scale`).
        checkpoint_s, min_run_s, max_preemptions: preemption's save + restore time and its guards (default
            30 s, 600 s, 3).
        las_limits_gpu_h, starve_factor: las's queue limits (GPU-hours, increasing; default (1, 10)) and its
            promotion (default 10).
        uplink_factor: without a link model, the network stall multiplier across switches (default 2).
        An option that no simulation here would use is refused, not dropped (api/schedule_unused.py): one
            that sets only policies not run, trace_format with synthetic_jobs, tune_fraction without split
            tuning, mean_gap_s with batch arrivals, uplink_factor with node_gbps.
        node_gbps: node uplink bandwidth, Gbit/s: links shared max-min fairly (default: no link model), with
            `uplink_gbps` or `oversubscription` for the switches' uplinks; `reference_gbps` the bandwidth a
            trace's slowdowns hold for (default 10; the link model's, so with `node_gbps` only).
        out: the folder of the result file (default: results/ next to the database); jobs_csv: also each
            job's outcome per policy, as CSV;
            no_store: write the file only, not the database.
        max_jobs: refuse a trace of more jobs than this (default: no limit).
        trace_label: how the result names the trace (default: its path and format).
        db: the database (default $STASH_DB, else ./results.duckdb).

    Returns:
        Schedule: `.to_frame()` one row per policy with its metrics; `.doc` the whole simulation.

    Raises:
        UsageError: a bad value, both or neither of trace and synthetic_jobs, an output that would replace
            an input, or an unreadable trace.
    """
    from stash_core.sched import Cluster, Policy
    from stash_core.sched.outputs import check_outputs
    from stash_core.sched.report import run_simulation, save_simulation

    if (trace is None) == (synthetic_jobs is None):
        raise UsageError("simulate_schedule: give one of trace and synthetic_jobs")
    shape = Cluster(*cluster_shape(cluster))
    chosen = chosen_policies(policies, defaults.POLICY_NAMES)
    if tuning is None:
        tuning = "given" if delay_s is not None or scale is not None else defaults.TUNING
    choice("tuning", tuning, ("split", "online", "given"))
    if tuning != "given" and (delay_s is not None or scale is not None):
        raise UsageError("--delay-s and --scale set the timers: use them with --tuning given")
    unused_if_given = {
        "delay_s": delay_s, "scale": scale, "checkpoint_s": checkpoint_s, "min_run_s": min_run_s,
        "max_preemptions": max_preemptions, "las_limits_gpu_h": las_limits_gpu_h,
        "starve_factor": starve_factor, "tune_fraction": tune_fraction, "mean_gap_s": mean_gap_s,
        "uplink_factor": uplink_factor, "node_gbps": node_gbps,
    }  # fmt: skip
    refuse_unused(unused_if_given, chosen, tuning=tuning, synthetic=synthetic_jobs is not None,
                  trace_format=trace_format, arrivals=arrivals)  # fmt: skip
    tune_fraction = defaults.TUNE_FRACTION if tune_fraction is None else tune_fraction
    fraction_rule = Number(0, 1, whole=False, low_open=True, high_open=True, what="a fraction from 0 to 1")
    fraction = required("tune_fraction", tune_fraction, fraction_rule)
    fabric = _fabric(node_gbps, uplink_gbps, oversubscription, reference_gbps, shape)
    from stash_core.results.file import results_dir_of

    db_path = database(db)
    out_dir = results_dir_of(db_path) if out is None else required_path("out", out)
    jobs_csv = path_argument("jobs_csv", jobs_csv)
    trace_path = path_argument("trace", trace)
    no_store = switch("no_store", no_store)
    _refuse_overwrites(out_dir, jobs_csv, db_path, trace_path)
    check_outputs(out_dir, jobs_csv, db_path, store=not no_store, out_given=out is not None,
                  db_named_by=db_named_by(db))  # fmt: skip
    _check_label(trace_label)
    jobs, source, trace_format = _jobs(trace_path, synthetic_jobs, trace_format, generator, arrivals, seed,
                                       mean_gap_s, db_path)  # fmt: skip
    most = checked("max_jobs", max_jobs, count(10**9))
    if most is not None and len(jobs) > most:
        raise TraceTooLarge(len(jobs), most)
    delay_s, scale = checked("delay_s", delay_s, NON_NEGATIVE_YEAR), checked("scale", scale, NON_NEGATIVE)
    given = {"delay_s": defaults.DELAY_S if delay_s is None else delay_s,
             "scale": defaults.SCALE if scale is None else scale}  # fmt: skip
    checkpoint_s, min_run_s, max_preemptions, las_limits_gpu_h, starve_factor, uplink_factor = (
        defaults.CHECKPOINT_S if checkpoint_s is None else checkpoint_s,
        defaults.MIN_RUN_S if min_run_s is None else min_run_s,
        defaults.MAX_PREEMPTIONS if max_preemptions is None else max_preemptions,
        defaults.LAS_LIMITS_GPU_H if las_limits_gpu_h is None else las_limits_gpu_h,
        defaults.STARVE_FACTOR if starve_factor is None else starve_factor,
        defaults.UPLINK_FACTOR if uplink_factor is None else uplink_factor,
    )
    bases = [Policy(name, checkpoint_s=required("checkpoint_s", checkpoint_s, NON_NEGATIVE_YEAR),
                    min_run_s=required("min_run_s", min_run_s, NON_NEGATIVE_YEAR),
                    max_preemptions=int(required("max_preemptions", max_preemptions,
                                                 Number(0, 1000, what="an integer from 0 to 1000"))),
                    las_limits_gpu_s=las_limits_s(las_limits_gpu_h),
                    starve_factor=required("starve_factor", starve_factor, NON_NEGATIVE), **given)
             for name in chosen]  # fmt: skip
    at_least_one = Number(1, 1000, whole=False, what="a number >= 1")
    uplink_factor = required("uplink_factor", uplink_factor, at_least_one)
    doc, outcomes = run_simulation(
        jobs, shape, bases, tuning=tuning, fraction=fraction, uplink_factor=uplink_factor, fabric=fabric,
        trace=trace_label or source, trace_format=trace_format,
    )  # fmt: skip
    stored = None if no_store else db_path
    labels = {entry["policy"]: entry["settings"]["label"] for entry in doc["policies"]}
    per_job = None if jobs_csv is None else _per_job(outcomes, labels)
    path = save_simulation(doc, out_dir, stored, per_job, jobs_csv)
    return Schedule(simulation_id=doc["simulation_id"], result_file=path, db=stored, doc=doc, jobs=jobs,
                    source=trace_label or source, cluster=shape, fabric=fabric)  # fmt: skip


def cluster_shape(value: tuple[int, int, int] | str) -> tuple[int, int, int]:
    """(switches, nodes per switch, GPUs per node) of (2, 4, 8) or "2x4x8": positive, at most
    MAX_GPUS_PER_NODE a node and a million GPUs in all."""
    if not isinstance(value, str | tuple | list):
        raise UsageError(f"cluster: {value!r}: give SWITCHESxNODESxGPUS, e.g. 2x4x8 or (2, 4, 8)"[:200])
    text = value if isinstance(value, str) else "x".join(str(part) for part in value)
    match = re.fullmatch(r"\s*(\d{1,7})\s*x\s*(\d{1,7})\s*x\s*(\d{1,7})\s*", text or "")
    if not match or min(int(part) for part in match.groups()) < 1:
        raise UsageError(f"cluster: {text!r}: give SWITCHESxNODESxGPUS with positive numbers, e.g. 2x4x8")
    switches, nodes, gpus = (int(part) for part in match.groups())
    if switches * nodes * gpus > MAX_CLUSTER_GPUS:
        raise UsageError(f"cluster: {text!r}: more than {MAX_CLUSTER_GPUS:,} GPUs in all")
    if gpus > MAX_GPUS_PER_NODE:
        raise UsageError(f"cluster: {text!r}: more than {MAX_GPUS_PER_NODE:,} GPUs in one node (a machine)")
    return switches, nodes, gpus


def _refuse_overwrites(out_dir: Path, jobs_csv: Path | None, db_path: Path, trace: Path | None) -> None:
    from stash_core.sched.pai import task_table_of

    reads = [("the database", db_path), ("the database's write-ahead log", Path(f"{db_path}.wal"))]
    reads += [("--trace", trace)] if trace is not None else []
    if trace is not None and task_table_of(trace) != trace:  # a PAI job table's companion, read with it
        reads.append(("the PAI task table", task_table_of(trace)))
    refuse_overwrite("--out", out_dir, reads)
    if jobs_csv is not None:
        refuse_overwrite("--jobs-csv", jobs_csv, reads)


def _jobs(
    trace: Path | None, synthetic_jobs: int | None, trace_format: str, generator: str | None,
    arrivals: str | None, seed: int | None, mean_gap_s: float | None, db_path: Path,
) -> tuple[list, str, str]:  # fmt: skip
    """The jobs (trace or synthetic, arrivals applied), a name for their source, and their format."""
    from dataclasses import replace

    from stash_core.sched import jobs_from_frame, load_trace_counted, synthetic_trace
    from stash_core.sched.detect import FORMATS, detect_format
    from stash_core.sched.generate import philly_like_trace

    shaping = [name for name, value in (("generator", generator), ("mean_gap_s", mean_gap_s), ("seed", seed))
               if value is not None]  # fmt: skip
    if trace is not None and shaping:  # a trace's own jobs: each would be dropped without a word
        raise UsageError(f"{shaping[0]} shapes a synthetic trace (synthetic_jobs); it does not go with trace")
    generator = defaults.GENERATOR if generator is None else generator
    seed = defaults.SEED if seed is None else seed
    # Every value is checked, also those the source at hand does not use, as the command line checks them.
    choice("trace_format", trace_format, ("auto", *FORMATS))
    choice("generator", generator, ("basic", "philly"))
    if arrivals is not None:
        choice("arrivals", arrivals, defaults.ARRIVAL_KINDS)
    gap_s = checked("mean_gap_s", mean_gap_s, positive_real(YEAR_S)) or defaults.MEAN_GAP_S
    seed = required("seed", seed, Number(0, 2**31 - 1, what="an integer >= 0"))
    if trace is not None:
        if arrivals not in (None, "batch"):
            raise UsageError(f"--arrivals {arrivals} makes synthetic arrivals; a trace takes only batch")
        trace_format = detect_format(trace) if trace_format == "auto" else trace_format
        jobs, left_out = load_trace_counted(trace, db_path, trace_format)
        source = f"{trace} ({trace_format})"
        if left_out:  # the log's jobs without GPUs or a run time: not simulated, and said so
            listed, without = len(jobs) + left_out, f"{left_out:,} without GPUs or a run time left out"
            source = f"{trace} ({trace_format}; {len(jobs):,} of its {listed:,} jobs, {without})"
        if arrivals == "batch":
            jobs, source = [replace(job, submit_s=0.0) for job in jobs], f"{source}, all submitted at 0"
        return jobs, source, trace_format
    jobs_count = checked("synthetic_jobs", synthetic_jobs, count(100_000))
    arrivals = arrivals or defaults.ARRIVALS
    if (jobs_count - 1) * gap_s > MAX_SYNTHETIC_SPAN_S:  # the arrivals would pass the traces' 100-year bound
        raise UsageError(
            f"--synthetic-jobs {jobs_count} x --mean-gap-s {gap_s:g} spreads the arrivals over about "
            f"{(jobs_count - 1) * gap_s / YEAR_S:,.0f} years; keep it within "
            f"{MAX_SYNTHETIC_SPAN_S / YEAR_S:.0f}"
        )
    if generator == "philly":
        frame = philly_like_trace(jobs_count, seed, gap_s, arrivals)
    else:
        frame = synthetic_trace(jobs_count, seed, list(defaults.MODELS), gap_s, arrivals)
    jobs = jobs_from_frame(frame, db_path, "synthetic trace")
    kind = "Philly-like" if generator == "philly" else "synthetic"
    return jobs, f"{kind}({len(jobs)} jobs, seed {seed}, {arrivals} arrivals)", SYNTHETIC_TRACE


def _check_label(label: object) -> None:
    """A trace label is stored and shown as the trace's name: a text (an empty one was replaced without a
    word, the number 5 stored as the name)."""
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise UsageError(f"trace_label: expected a text that is not empty, got {label!r}"[:200])


def _fabric(node_gbps: float | None, uplink_gbps: float | None, oversubscription: float | None,
            reference_gbps: float | None, shape: object):  # fmt: skip
    """The shared links of `node_gbps` with `uplink_gbps` or `oversubscription`; None without `node_gbps`."""
    from stash_core.sched.fabric import Fabric

    node_gbps = checked("node_gbps", node_gbps, positive_real(1e6))
    uplink_gbps = checked("uplink_gbps", uplink_gbps, positive_real(1e6))
    ratio = checked("oversubscription", oversubscription, positive_real(1e6))
    reference = checked("reference_gbps", reference_gbps, positive_real(1e6))
    if node_gbps is None:
        if uplink_gbps is not None or ratio is not None:
            raise UsageError("--uplink-gbps and --oversubscription need --node-gbps")
        if reference is not None:  # without links a placement's slowdown is the trace's, at any rate
            raise UsageError("--reference-gbps is the rate the link model reads a trace's slowdowns at: it "
                             "needs --node-gbps")  # fmt: skip
        return None
    reference = defaults.REFERENCE if reference is None else reference
    if uplink_gbps is not None and ratio is not None:
        raise UsageError("give one of --uplink-gbps and --oversubscription")
    if uplink_gbps is not None:
        return Fabric(node_gbps, uplink_gbps, reference)
    ratio = ratio or defaults.OVERSUBSCRIPTION
    return Fabric.oversubscribed(node_gbps, ratio, shape.nodes_per_switch, reference)


def las_limits_s(value: tuple[float, ...] | str) -> tuple[float, ...]:
    """las's limits in GPU-seconds from GPU-hours ("1,10" or (1, 10)): positive and increasing."""
    try:
        limits = [float(part) for part in (value.split(",") if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        limits = []
    if not limits or not all(0 < limit < 1e9 for limit in limits) or limits != sorted(set(limits)):
        raise UsageError(f"las_limits_gpu_h: {value!r}: give positive, increasing GPU-hours, e.g. 1,10")
    return tuple(3600.0 * limit for limit in limits)


def _per_job(outcomes: dict, labels: dict[str, str]) -> object:
    """Each job's outcome under each policy (the --jobs-csv table); `label` is the policy with its settings as
    the summary names it ("delay 60 s"), to join the two on."""
    import pandas as pd

    return pd.DataFrame([
        {"policy": name, "job_id": o.job.job_id, "gpus": o.job.gpus, "submit_s": o.job.submit_s,
         "start_s": o.start_s, "finish_s": o.finish_s, "queued_s": o.queued_s, "held_s": o.run_s,
         "level": o.level, "nodes": o.nodes, "preemptions": o.preemptions, "slowdown": o.job.slowdown,
         "slowdown_source": o.job.slowdown_source, "label": labels[name]}
        for name, result in outcomes.items() for o in result
    ])  # fmt: skip


def chosen_policies(value: list[str] | str | None, known: tuple[str, ...]) -> list[str]:
    chosen = list(known) if value is None else [name.strip() for name in _split(value)]
    if isinstance(value, str) and (said := empty_item(value)):  # "fifo,,las"
        raise UsageError(f"policies: {said}")
    if any(chosen) and not all(chosen):  # a list holding ""
        raise UsageError(f"policies: an empty name in {value!r:.200}")
    chosen = [name for name in chosen if name]
    unknown = [name for name in chosen if name not in known]
    if unknown or not chosen:
        unknown_text = ", ".join(unknown) or "(none)"
        raise UsageError(f"policies: unknown policy {unknown_text}; choose from {', '.join(known)}")
    twice = sorted({name for name in chosen if chosen.count(name) > 1})
    if twice:
        raise UsageError(f"policies: {', '.join(twice)} given more than once; give each policy once")
    return chosen


def _split(value: list[str] | str) -> list[str]:
    if not isinstance(value, str | tuple | list):
        raise UsageError(f"policies: expected a list of policy names, got {value!r}"[:200])
    return value.split(",") if isinstance(value, str) else [str(name) for name in value]
