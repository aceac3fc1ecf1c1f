"""`stash schedule`: simulate how a shared GPU cluster places network-sensitive jobs, policy by policy.

cli/main.py wires it in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path
from typing import Any

from stash_core.cli.args import Number, add_db_argument, count, db_path, non_negative, positive_real, seed
from stash_core.pathargs import input_path, output_path
from stash_core.errors import UsageError
from stash_core.sched import defaults
from stash_core.sched.detect import FORMATS
from stash_core.sched.policy import DEFINITIONS, POLICIES

# The simulator is imported inside the functions: building `stash --help` must not load pandas (the
# modules above do not).

TUNINGS = ("split", "online", "given")
GENERATORS = ("basic", "philly")
YEAR_S = 365 * 86400.0
MAX_CLUSTER_GPUS = 1_000_000


def cluster_text(text: str) -> str:
    """argparse type of --cluster SWITCHESxNODESxGPUS: positive numbers, at most a million GPUs in all."""
    match = re.fullmatch(r"\s*(\d{1,7})\s*x\s*(\d{1,7})\s*x\s*(\d{1,7})\s*", text or "")
    if not match or min(int(v) for v in match.groups()) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give SWITCHESxNODESxGPUS with positive numbers, e.g. 2x4x8"
        )
    switches, nodes, gpus = (int(v) for v in match.groups())
    if switches * nodes * gpus > MAX_CLUSTER_GPUS:
        raise argparse.ArgumentTypeError(f"{text!r}: more than {MAX_CLUSTER_GPUS:,} GPUs in all")
    return text


def policies_text(text: str) -> str:
    """argparse type of --policies: a comma list of known policies."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(POLICIES)}"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given more than once; give each policy once")
    return text


def las_limits_text(text: str) -> str:
    """argparse type of --las-limits-gpu-h: positive, increasing GPU-hours, comma separated."""
    try:
        limits = [float(value) for value in text.split(",")]
    except ValueError:
        limits = []
    finite = all(0 < value < 1e9 for value in limits)  # also refuses nan and inf
    if not limits or not finite or limits != sorted(set(limits)):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive, increasing GPU-hours, e.g. 1,10")
    return text


DEFAULT_MODELS = list(defaults.MODELS)
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
    source.add_argument("--trace", type=input_path, help="trace file (docs/traces.md); format: --trace-format")
    source.add_argument("--synthetic-jobs", type=count(100_000), help="generate a trace of N jobs")
    sched.add_argument(
        "--trace-format", choices=("auto", *FORMATS), default=defaults.TRACE_FORMAT,
        help="auto (told from the file's columns; the default), tiresias CSV, philly cluster_job_log, "
        "pai2020 pai_job_table.csv (task table beside it), helios cluster_log.csv",
    )  # fmt: skip
    sched.add_argument(
        "--arrivals", choices=defaults.ARRIVAL_KINDS, default=None,
        help="synthetic arrivals: poisson (the default), batch (all at 0), burst (groups of 20); with "
        "--trace only batch: submit all its jobs at once",
    )  # fmt: skip
    sched.add_argument(
        "--generator", choices=GENERATORS, default=defaults.GENERATOR,
        help="synthetic trace: basic (1-16 GPUs, log-normal durations) or philly (1-32 GPUs, heavy-tailed "
        "durations, diurnal arrivals, per-model gradient sizes; stash_core/sched/generate.py)",
    )  # fmt: skip
    sched.add_argument("--seed", type=seed, default=defaults.SEED, help="seed of the synthetic trace")
    sched.add_argument(
        "--mean-gap-s", type=positive_real(YEAR_S), default=defaults.MEAN_GAP_S,
        help="mean time between synthetic arrivals",
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
        "between 0 and 1"), default=defaults.TUNE_FRACTION,
        help="split tuning: share of the jobs (first by arrival) to tune on",
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
        default=defaults.CHECKPOINT_S,
        help="preemption: save + restore seconds",
    )
    sched.add_argument(
        "--min-run-s", type=non_negative(YEAR_S), default=defaults.MIN_RUN_S,
        help="preemption guard: seconds a job runs after each start before it may be preempted",
    )  # fmt: skip
    sched.add_argument(
        "--max-preemptions", type=Number(0, 1000, what="an integer from 0 to 1000"),
        default=defaults.MAX_PREEMPTIONS,
        help="preemption guard: per job",
    )  # fmt: skip
    sched.add_argument(
        "--las-limits-gpu-h", type=las_limits_text,
        default=",".join(f"{v:g}" for v in defaults.LAS_LIMITS_GPU_H),
        help="las: attained service (GPU-hours) between its queues, increasing, comma list",
    )  # fmt: skip
    sched.add_argument(
        "--starve-factor", type=non_negative(1e6), default=defaults.STARVE_FACTOR,
        help="las: a preempted job waiting longer than this x the seconds it ran goes back to the top queue "
        "(0: never)",
    )  # fmt: skip
    sched.add_argument(
        "--uplink-factor", type=Number(1, 1000, whole=False, what="a number >= 1"),
        default=defaults.UPLINK_FACTOR, help="without --node-gbps: network stall multiplier across switches",
    )  # fmt: skip
    sched.add_argument(
        "--node-gbps", type=positive_real(1e6), default=None,
        help="node uplink bandwidth, Gbit/s: links shared max-min fairly, communication = ring all-reduce "
        "bytes over the rate a job gets (stash_core/sched/fabric.py; replaces --uplink-factor)",
    )  # fmt: skip
    sched.add_argument(
        "--reference-gbps", type=positive_real(1e6), default=defaults.REFERENCE,
        help="the bandwidth a trace's network_slowdown (or Blox's penalty) holds for, Gbit/s",
    )  # fmt: skip
    fabric = sched.add_mutually_exclusive_group()
    fabric.add_argument("--uplink-gbps", type=positive_real(1e6), default=None, help="switch uplink, Gbit/s")
    fabric.add_argument(
        "--oversubscription", type=positive_real(1e6), default=None,
        help=f"switch uplink = nodes per switch x --node-gbps / this (default {defaults.OVERSUBSCRIPTION:g})",
    )  # fmt: skip
    sched.add_argument("--jobs-csv", type=output_path, default=None, help="write each job's outcome per policy here")
    sched.add_argument(
        "--out", type=output_path, default=Path("results"), help="folder of the result file sim-*.json"
    )
    sched.add_argument("--no-store", action="store_true", help="write the result file only, not the database")
    add_db_argument(sched)


def cmd_schedule(args: argparse.Namespace) -> int:
    import pandas as pd

    from stash_core.cli.sched_output import check_outputs
    from stash_core.sched import Policy
    from stash_core.sched.report import run_simulation, save_simulation

    cluster = parse_cluster(args.cluster)
    fabric = parse_fabric(args, cluster)
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    tuning = args.tuning or ("given" if args.delay_s is not None or args.scale is not None else "split")
    if tuning != "given" and (args.delay_s is not None or args.scale is not None):
        raise UsageError("--delay-s and --scale set the timers: use them with --tuning given")
    database = db_path(args)
    check_outputs(args.out, args.jobs_csv, database, store=not args.no_store)  # before any work
    jobs, source, trace_format = read_jobs(args, database)
    given = {"delay_s": defaults.DELAY_S if args.delay_s is None else args.delay_s,
             "scale": defaults.SCALE if args.scale is None else args.scale}  # fmt: skip
    las_limits = tuple(3600.0 * float(value) for value in args.las_limits_gpu_h.split(","))
    bases = [Policy(name, checkpoint_s=args.checkpoint_s, min_run_s=args.min_run_s,
                    max_preemptions=int(args.max_preemptions), las_limits_gpu_s=las_limits,
                    starve_factor=args.starve_factor, **given) for name in names]  # fmt: skip
    doc, outcomes = run_simulation(
        jobs, cluster, bases, tuning=tuning, fraction=args.tune_fraction, uplink_factor=args.uplink_factor,
        fabric=fabric, trace=source, trace_format=trace_format,
    )  # fmt: skip
    per_job = None
    if args.jobs_csv is not None:
        per_job = pd.DataFrame([
            {"policy": name, "job_id": o.job.job_id, "gpus": o.job.gpus, "submit_s": o.job.submit_s,
             "start_s": o.start_s, "finish_s": o.finish_s, "level": o.level, "nodes": o.nodes,
             "preemptions": o.preemptions, "slowdown": o.job.slowdown,
             "slowdown_source": o.job.slowdown_source}
            for name, result in outcomes.items() for o in result
        ])  # fmt: skip
    path = save_simulation(doc, args.out, None if args.no_store else database, per_job, args.jobs_csv)
    if fabric is not None:
        source += f"\nlinks shared max-min fairly: {fabric.label()}"
    else:
        factor = f"{args.uplink_factor:g}"
        source += f"\nno link model: crossing more switches than needed multiplies the stall by {factor}"
        # (give --node-gbps for links shared by bandwidth)
    rows = [{"policy": entry["settings"]["label"], **entry["metrics"]} for entry in doc["policies"]]
    print(format_comparison(rows, jobs, cluster, source, doc["tuning"]))
    print(f"result: {path}" + ("" if args.no_store else f"; stored in {database}"))
    return 0


def read_jobs(args: argparse.Namespace, database: Path) -> tuple[list, str, str]:
    """The jobs (trace or synthetic, arrivals applied), a name for their source, and their format."""
    from dataclasses import replace

    from stash_core.sched import jobs_from_frame, load_trace, synthetic_trace
    from stash_core.sched.detect import detect_format
    from stash_core.sched.generate import philly_like_trace

    if args.trace is not None:
        if args.arrivals not in (None, "batch"):
            raise UsageError(f"--arrivals {args.arrivals} makes synthetic arrivals; a trace takes only batch")
        trace_format = detect_format(args.trace) if args.trace_format == "auto" else args.trace_format
        jobs = load_trace(args.trace, database, trace_format)
        source = f"{args.trace} ({trace_format})"
        if args.arrivals == "batch":
            jobs = [replace(job, submit_s=0.0) for job in jobs]
            source += ", all submitted at 0"
        return jobs, source, trace_format
    arrivals = args.arrivals or defaults.ARRIVALS
    if args.generator == "philly":
        frame = philly_like_trace(args.synthetic_jobs, args.seed, args.mean_gap_s, arrivals)
    else:
        frame = synthetic_trace(args.synthetic_jobs, args.seed, DEFAULT_MODELS, args.mean_gap_s, arrivals)
    jobs = jobs_from_frame(frame, database, "synthetic trace")
    kind = "Philly-like" if args.generator == "philly" else "synthetic"
    return jobs, f"{kind}({len(jobs)} jobs, seed {args.seed}, {arrivals} arrivals)", "synthetic"


def parse_cluster(text: str):
    from stash_core.sched import Cluster

    match = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*", text or "")
    if not match or min(int(v) for v in match.groups()) < 1:
        raise UsageError(f"--cluster {text!r}: give SWITCHESxNODESxGPUS with positive numbers, e.g. 2x4x8")
    switches, nodes, gpus = (int(v) for v in match.groups())
    return Cluster(switches, nodes, gpus)


def parse_fabric(args: argparse.Namespace, cluster: Any):
    """The shared links of --node-gbps with --uplink-gbps or --oversubscription; None without --node-gbps."""
    from stash_core.sched.fabric import Fabric

    node_gbps = getattr(args, "node_gbps", None)
    reference = getattr(args, "reference_gbps", None) or defaults.REFERENCE
    uplink_gbps, ratio = getattr(args, "uplink_gbps", None), getattr(args, "oversubscription", None)
    if node_gbps is None:
        if uplink_gbps is not None or ratio is not None:
            raise UsageError("--uplink-gbps and --oversubscription need --node-gbps")
        return None
    if uplink_gbps is not None:
        return Fabric(node_gbps, uplink_gbps, reference)
    return Fabric.oversubscribed(
        node_gbps, ratio or defaults.OVERSUBSCRIPTION, cluster.nodes_per_switch, reference
    )


SOURCE_WORDS = {
    "trace": "from the trace's network_slowdown",
    "measured": "measured by Stash (multi-node profiles of their model)",
    "blox": "from Blox's penalty for their model",
    "blox default": "from Blox's default penalty (model not in Blox's list: 0.8 of the speed)",
    "drawn (blox)": "drawn from Blox's penalties (the trace names no model)",
}


def format_comparison(rows: list[dict[str, Any]], jobs: list, cluster: Any, source: str, tuning: str) -> str:
    sources = Counter(job.slowdown_source for job in jobs)
    first, _, rest = source.partition("\n")
    width = max([34, *(len(row["policy"]) + 2 for row in rows)])  # labels such as a timer's never run over
    lines = [
        f"{first} on {cluster.switches} switch(es) x {cluster.nodes_per_switch} nodes x "
        f"{cluster.gpus_per_node} GPUs ({cluster.total_gpus} GPUs)",
        *([rest] if rest else []),
        "network sensitivity (slowdown when spread) of the jobs: "
        + "; ".join(f"{n} {SOURCE_WORDS.get(kind, kind)}" for kind, n in sources.most_common()),
        "",
        f"  {'policy':<{width}}{'makespan h':>11}{'avg JCT h':>11}{'p95 JCT h':>11}{'queue h':>9}"
        f"{'comm h':>9}{'spread':>8}{'preempt':>9}{'GPU busy':>10}",
    ]
    for row in rows:
        lines.append(
            f"  {row['policy']:<{width}}{row['makespan_s'] / 3600:>11.2f}{row['avg_jct_s'] / 3600:>11.2f}"
            f"{row['p95_jct_s'] / 3600:>11.2f}{row['avg_queue_s'] / 3600:>9.2f}"
            f"{row['comm_overhead_s'] / 3600:>9.2f}{row['spread_jobs']:>8}{row['preemptions']:>9}"
            f"{row['gpu_busy_share']:>10.0%}"
        )
    lines.append(f"tuning: {tuning}")
    lines.append(
        "comm h: run time lost to spread placements and congestion; sjf, las and the network timers use "
        "estimated durations, never the true ones; a simulation, not a measurement"
    )
    return "\n".join(lines)


COMMANDS = {"schedule": cmd_schedule}
