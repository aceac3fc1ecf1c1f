"""`stash schedule`: simulate how a shared GPU cluster places network-sensitive jobs, policy by policy.

cli/main.py wires it in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stash_core.api.schedule_unused import USED_BY, as_flag, refuse_unused
from stash_core.api.scheduling import chosen_policies, cluster_shape, las_limits_s
from stash_core.cli.args import Number, add_db_argument, count, db_path, non_negative, positive_real, seed
from stash_core.errors import UsageError
from stash_core.pathargs import input_path, output_path
from stash_core.sched import defaults
from stash_core.sched.assumptions import (
    links_line,
    offered_load_line,
    sensitivity_counts,
    sensitivity_line,
)
from stash_core.sched.detect import FORMATS
from stash_core.sched.policy import DEFINITIONS, POLICIES
from stash_core.terminal import printable

# The simulator is imported inside the functions: building `stash --help` must not load pandas (the
# modules above do not).

TUNINGS = ("split", "online", "given")
GENERATORS = ("basic", "philly")
YEAR_S = 365 * 86400.0


def _api_rule(check: Any, what: str) -> Any:
    """argparse type from the Python API's own check (api/scheduling.py): the same rule and words, less the
    API's parameter name, which the parser puts as the flag."""

    def read(text: str) -> str:
        try:
            check(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None
        return text

    read.__name__ = what  # argparse names a failed type by it
    return read


cluster_text = _api_rule(cluster_shape, "cluster")  # SWITCHESxNODESxGPUS, within api.scheduling's caps
policies_text = _api_rule(lambda text: chosen_policies(text, POLICIES), "policies")  # known, each once
las_limits_text = _api_rule(las_limits_s, "las_limits")  # positive, increasing GPU-hours


POLICY_HELP = "policies (--policies):\n" + "\n".join(f"  {name:<17}{DEFINITIONS[name]}" for name in POLICIES)


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    sched = subparsers.add_parser(
        "schedule", help="simulate placing network-sensitive jobs in a shared GPU cluster (delay scheduling)",
        epilog=POLICY_HELP,
    )  # fmt: skip
    # the policies one a line, as written; options keep the parser's own help (with their defaults)
    sched.formatter_class = type(
        "ScheduleHelp", (argparse.RawDescriptionHelpFormatter, sched.formatter_class), {}
    )
    source = sched.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--trace", type=input_path, help="trace file (docs/traces.md); format: --trace-format"
    )
    source.add_argument("--synthetic-jobs", type=count(100_000), help="generate a trace of N jobs")
    sched.add_argument(
        "--trace-format", choices=("auto", *FORMATS), default=defaults.TRACE_FORMAT,
        help="auto (told from the file's columns), tiresias CSV, philly cluster_job_log, "
        "pai2020 pai_job_table.csv (task table beside it), helios cluster_log.csv",
    )  # fmt: skip
    sched.add_argument(
        "--arrivals", choices=defaults.ARRIVAL_KINDS, default=None,
        help="synthetic arrivals: poisson (the default), batch (all at 0), burst (groups of 20); with "
        "--trace only batch: submit all its jobs at once",
    )  # fmt: skip
    sched.add_argument(
        "--generator", choices=GENERATORS, default=None,
        help=f"synthetic trace (default {defaults.GENERATOR}): basic (1-16 GPUs, log-normal durations) or "
        "philly (1-32 GPUs, heavy-tailed durations, diurnal arrivals, per-model gradient sizes; "
        "stash_core/sched/generate.py)",
    )  # fmt: skip
    sched.add_argument(
        "--seed", type=seed, default=None, help=f"seed of the synthetic trace (default {defaults.SEED})"
    )
    sched.add_argument(
        "--mean-gap-s", type=positive_real(YEAR_S), default=None,
        help=f"mean time between synthetic arrivals (default {defaults.MEAN_GAP_S:g})",
    )  # fmt: skip
    sched.add_argument(
        "--cluster", type=cluster_text, default="x".join(map(str, defaults.CLUSTER)),
        help="SWITCHESxNODESxGPUS, nodes per switch",
    )  # fmt: skip
    sched.add_argument(
        "--policies", type=policies_text, default=",".join(POLICIES), help="comma list (see below)"
    )
    sched.add_argument(
        "--tuning", choices=TUNINGS, default=None,
        help="how timers are set: split (tuned on the first --tune-fraction of the jobs, reported on the "
        "rest; the default), online (from estimates and observed waits), given (--delay-s, --scale)",
    )  # fmt: skip
    sched.add_argument(
        "--tune-fraction", type=Number(0, 1, whole=False, low_open=True, high_open=True, what="a fraction "
        "between 0 and 1"), default=None,
        help="split tuning: share of the jobs (first by arrival) to tune on "
        f"(default {defaults.TUNE_FRACTION:g})",
    )  # fmt: skip
    sched.add_argument(
        "--delay-s",
        type=non_negative(YEAR_S),
        default=None,
        help=f"delay timer (implies given; {defaults.DELAY_S:g} s when other timers are given)",
    )
    sched.add_argument(
        "--scale",
        type=non_negative(1e6),
        default=None,
        help=f"network-* timer scale (implies given; {defaults.SCALE:g} when other timers are given)",
    )
    sched.add_argument(
        "--checkpoint-s",
        type=non_negative(YEAR_S),
        default=None,
        help=f"preemption (las, network-preempt): save + restore seconds (default {defaults.CHECKPOINT_S:g})",
    )
    sched.add_argument(
        "--min-run-s", type=non_negative(YEAR_S), default=None,
        help="preemption guard: seconds a job runs after each start before it may be preempted "
        f"(default {defaults.MIN_RUN_S:g})",
    )  # fmt: skip
    sched.add_argument(
        "--max-preemptions", type=Number(0, 1000, what="an integer from 0 to 1000"), default=None,
        help=f"preemption guard: per job (default {defaults.MAX_PREEMPTIONS})",
    )  # fmt: skip
    sched.add_argument(
        "--las-limits-gpu-h", type=las_limits_text, default=None,
        help="las: attained service (GPU-hours) between its queues, increasing, comma list (default "
        f"{','.join(f'{v:g}' for v in defaults.LAS_LIMITS_GPU_H)})",
    )  # fmt: skip
    sched.add_argument(
        "--starve-factor", type=non_negative(1e6), default=None,
        help="las: a preempted job waiting longer than this x the seconds it ran goes back to the top queue "
        f"(0: never; default {defaults.STARVE_FACTOR:g})",
    )  # fmt: skip
    sched.add_argument(
        "--uplink-factor", type=Number(1, 1000, whole=False, what="a number >= 1"),
        default=None,
        help="without --node-gbps: network stall multiplier across switches "
        f"(default {defaults.UPLINK_FACTOR:g})",
    )  # fmt: skip
    sched.add_argument(
        "--node-gbps", type=positive_real(1e6), default=None,
        help="node uplink bandwidth, Gbit/s: links shared max-min fairly, communication = ring all-reduce "
        "bytes over the rate a job gets (stash_core/sched/fabric.py; replaces --uplink-factor)",
    )  # fmt: skip
    sched.add_argument(
        "--reference-gbps", type=positive_real(1e6), default=None,
        help="with --node-gbps: the bandwidth a trace's network_slowdown (or Blox's penalty) holds for, "
        f"Gbit/s (default {defaults.REFERENCE:g})",
    )  # fmt: skip
    fabric = sched.add_mutually_exclusive_group()
    fabric.add_argument("--uplink-gbps", type=positive_real(1e6), default=None, help="switch uplink, Gbit/s")
    fabric.add_argument(
        "--oversubscription", type=positive_real(1e6), default=None,
        help=f"switch uplink = nodes per switch x --node-gbps / this (default {defaults.OVERSUBSCRIPTION:g})",
    )  # fmt: skip
    sched.add_argument(
        "--jobs-csv", type=output_path, default=None, help="write each job's outcome per policy here"
    )
    sched.add_argument(
        "--out", type=output_path, default=None,
        help="folder of the result file sim-*.json (default: results/ next to the database, as a profile's)",
    )  # fmt: skip
    sched.add_argument("--no-store", action="store_true", help="write the result file only, not the database")
    add_db_argument(sched)


def cmd_schedule(args: argparse.Namespace) -> int:
    from stash_core.api.scheduling import simulate_schedule

    database = db_path(args)
    shaping = [flag for flag, value in (("--generator", args.generator), ("--mean-gap-s", args.mean_gap_s),
                                        ("--seed", args.seed)) if value is not None]  # fmt: skip
    if args.trace is not None and shaping:
        raise UsageError(f"{shaping[0]} shapes a synthetic trace (--synthetic-jobs); it does not go with "
                         "--trace")  # fmt: skip
    _refuse_unused(args)
    new = not database.exists()
    schedule = simulate_schedule(
        args.trace, synthetic_jobs=args.synthetic_jobs, trace_format=args.trace_format,
        generator=args.generator, arrivals=args.arrivals, seed=args.seed, mean_gap_s=args.mean_gap_s,
        cluster=args.cluster, policies=args.policies, tuning=args.tuning, tune_fraction=args.tune_fraction,
        delay_s=args.delay_s, scale=args.scale, checkpoint_s=args.checkpoint_s, min_run_s=args.min_run_s,
        max_preemptions=args.max_preemptions, las_limits_gpu_h=args.las_limits_gpu_h,
        starve_factor=args.starve_factor, uplink_factor=args.uplink_factor,
        node_gbps=args.node_gbps,
        uplink_gbps=args.uplink_gbps, oversubscription=args.oversubscription,
        reference_gbps=args.reference_gbps, out=args.out, jobs_csv=args.jobs_csv, no_store=args.no_store,
        db=args.db,  # None when not given: a refusal names $STASH_DB or the default, not --db
    )  # fmt: skip
    source = f"{schedule.source}\n{links_line(schedule.doc['fabric'])}"  # --node-gbps: links by bandwidth
    rows = [{"policy": entry["settings"]["label"], **entry["metrics"]} for entry in schedule.doc["policies"]]
    print(format_comparison(rows, schedule.jobs, schedule.cluster, source, schedule.doc["tuning"]))
    print(printable(f"result: {schedule.result_file}" + ("" if args.no_store else f"; stored in {database}")))
    if args.jobs_csv:  # where the per-job CSV went, said as the result file is
        print(printable(f"per-job CSV: {Path(args.jobs_csv).resolve()}"))
    if new and not args.no_store:  # a mistyped --db would otherwise go unnoticed
        print(printable(f"note: {database} did not exist: it is a new database"))
    return 0


def _refuse_unused(args: argparse.Namespace) -> None:
    """UsageError for an option the simulation would not use, as --delay-s without --tuning given is, or one
    that only policies not run use (--starve-factor with --policies fifo,sjf): api/schedule_unused.py, in
    the command's words."""
    timers_given = args.delay_s is not None or args.scale is not None
    given = {name: getattr(args, name) for name in (*USED_BY, "tune_fraction", "mean_gap_s", "uplink_factor",
                                                     "node_gbps")}  # fmt: skip
    refuse_unused(given, chosen_policies(args.policies, POLICIES),
                  tuning=args.tuning or ("given" if timers_given else defaults.TUNING),
                  synthetic=args.synthetic_jobs is not None, trace_format=args.trace_format,
                  arrivals=args.arrivals, spelled=as_flag)  # fmt: skip


# The comparison's columns after the policy: heading and narrowest width.
COLUMNS = (("makespan h", 11), ("avg JCT h", 11), ("p95 JCT h", 11), ("queue h", 9), ("comm h", 9),
           ("spread", 8), ("preempt", 9), ("GPU busy", 10))  # fmt: skip
# The first five columns, in hours.
HOURS_KEYS = ("makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "comm_overhead_s")


def format_comparison(rows: list[dict[str, Any]], jobs: list, cluster: Any, source: str, tuning: str) -> str:
    sources = sensitivity_counts(job.slowdown_source for job in jobs)
    first, _, rest = source.partition("\n")
    width = max([34, *(len(row["policy"]) + 2 for row in rows)])  # labels such as a timer's never run over
    lines = [
        f"{first} on {cluster.switches} switch(es) x {cluster.nodes_per_switch} nodes x "
        f"{cluster.gpus_per_node} GPUs ({cluster.total_gpus} GPUs)",
        *([rest] if rest else []),
        sensitivity_line(sources),
        offered_load_line(jobs, cluster.total_gpus),
        "",
    ]
    cells = [
        [*(f"{row[key] / 3600:.2f}" for key in HOURS_KEYS), str(row["spread_jobs"]), str(row["preemptions"]),
         f"{row['gpu_busy_share']:.0%}"]
        for row in rows
    ]  # fmt: skip
    # Each column as wide as its widest cell and two spaces: hours summed over a large trace never touch.
    widths = [max(minimum, *(len(line[i]) + 2 for line in cells)) for i, (_, minimum) in enumerate(COLUMNS)]
    lines.append(
        f"  {'policy':<{width}}"
        + "".join(f"{name:>{w}}" for (name, _), w in zip(COLUMNS, widths, strict=True))
    )
    for row, line in zip(rows, cells, strict=True):
        lines.append(
            f"  {row['policy']:<{width}}"
            + "".join(f"{cell:>{w}}" for cell, w in zip(line, widths, strict=True))
        )
    lines.append(f"tuning: {tuning}")
    lines.append(
        "over the reported jobs: makespan h from the first arrival to the last finish; avg and p95 JCT h, "
        "queue h (mean wait for GPUs) per job; comm h: run time lost to spread placements and congestion, "
        "summed over the jobs; spread: jobs placed looser than their tightest placement (a job larger than "
        "a node, on as few nodes as it needs, is not counted); GPU busy: their GPU-hours over the cluster's "
        "in the makespan; sjf, las and the network timers use estimated durations, never the true ones; a "
        "simulation of one trace, not a measurement: policies a few percent apart can swap places on "
        "another trace (or --seed)"
    )
    return "\n".join(lines)


COMMANDS = {"schedule": cmd_schedule}
