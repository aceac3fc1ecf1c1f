"""How long `stash schedule`'s simulator takes on a big, heavily loaded cluster, policy by policy.

A synthetic trace (the generator of `stash schedule --synthetic-jobs`) of 100,000 jobs arrives at a
cluster of 1,024 GPUs (16 switches x 8 nodes x 8 GPUs) with the mean gap between arrivals set so that the
offered load (expected GPU-seconds asked per second / GPUs) is about 85%. Each policy runs once with a
fixed timer (no tuning) in two scenarios: no fabric (a fixed uplink factor of 2), then congested shared
links (node uplinks of --node-gbps, switch uplinks oversubscribed --oversubscription:1). The script prints,
per scenario and policy, the wall time of the simulation (and its CPU time: on a shared machine the wall
time also counts the others' work) and what the schedule achieved. It prints
figures; it asserts nothing about them.

With --paper it runs the seed paper's experiment instead (bench/sched_paper.py): a Philly-like heavy trace
on a congested cluster, batch and continuous arrivals, the consolidation baselines against spread, delay
and the network-aware policies. It takes --jobs, --cluster, --load, --seed and --seeds (its own defaults
below) and refuses the other options, which it has fixed. --seeds N runs N traces (seeds SEED..SEED+N-1) and
ends with each figure's mean and 95% interval over them: one trace's order of the policies is not a finding.

    .venv/bin/python bench/schedule.py [--jobs 100000] [--cluster 16x8x8] [--load 0.85] [--policies ...]
        [--scenarios plain,congested] [--node-gbps 100 --oversubscription 4 --reference-gbps 10]
    .venv/bin/python bench/schedule.py --paper [--jobs 2000] [--cluster 8x4x8] [--load 0.8] [--seeds 1]
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_args import bench_parser, choice_list, cluster_shape, positive_float, positive_int, share  # noqa: E402

from stash_core.sched import POLICIES, Cluster, Policy, jobs_from_frame, simulate, synthetic_trace  # noqa: E402
from stash_core.sched.fabric import Fabric  # noqa: E402
from stash_core.sched.metrics import schedule_metrics  # noqa: E402

MODELS = ["resnet50", "resnet18", "alexnet", "shufflenet_v2", "vgg16", "bert_base"]
# the synthetic generator's GPU demands and log-normal durations (median 1800 s, sigma 1)
MEAN_GPUS = 0.35 * 1 + 0.2 * 2 + 0.2 * 4 + 0.15 * 8 + 0.1 * 16
MEAN_DURATION_S = 1800 * math.exp(0.5)


# The scale run's defaults; None in the parser, so that --paper (its own defaults, sched_paper.paper) can tell
# an option given from one left out, whichever way it was written (--jobs 100 or --jobs=100).
DEFAULTS = {
    "jobs": 100_000, "cluster": "16x8x8", "load": 0.85, "policies": ",".join(POLICIES),
    "scenarios": "plain,congested", "node_gbps": 100.0, "oversubscription": 4.0, "reference_gbps": 10.0,
}  # fmt: skip
PAPER_TAKES = ("jobs", "cluster", "load", "seed", "seeds")


def parse_args():
    parser = bench_parser(__doc__)
    parser.add_argument("--jobs", type=positive_int, help="default 100000 (--paper: 2000)")
    parser.add_argument(
        "--cluster", type=cluster_shape, help="SWITCHESxNODESxGPUS, default 16x8x8 (--paper: 8x4x8)"
    )
    parser.add_argument("--load", type=share, help="offered load, 0-1, default 0.85 (--paper: 0.8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=positive_int, help="--paper: traces, from --seed on (default 1)")
    parser.add_argument("--policies", type=choice_list(POLICIES), help=f"default {DEFAULTS['policies']}")
    parser.add_argument(
        "--scenarios",
        type=choice_list(["plain", "congested"]),
        help="plain (no fabric), congested; default both",
    )
    parser.add_argument("--node-gbps", type=positive_float, help="congested: node uplink Gbit/s, default 100")
    parser.add_argument(
        "--oversubscription", type=positive_float, help="congested: switch uplinks, default 4"
    )
    parser.add_argument(
        "--reference-gbps", type=positive_float, help="slowdowns are read at this, default 10"
    )
    parser.add_argument("--paper", action="store_true", help="the seed paper's experiment (sched_paper.py)")
    args = parser.parse_args()
    if args.paper:
        ignored = [name for name in DEFAULTS if name not in PAPER_TAKES and getattr(args, name) is not None]
        if ignored:
            given = ", ".join(f"--{name.replace('_', '-')}" for name in ignored)
            parser.error(f"--paper takes --jobs, --cluster, --load, --seed and --seeds only, not {given}")
        return args
    if args.seeds is not None:
        parser.error("--seeds goes with --paper: the scale run times one trace")
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main() -> None:
    args = parse_args()
    if args.paper:
        from sched_paper import paper

        given = {name: getattr(args, name) for name in PAPER_TAKES if getattr(args, name) is not None}
        paper(**given)
        return
    cluster = Cluster(*(int(v) for v in args.cluster.split("x")))
    gap_s = MEAN_GPUS * MEAN_DURATION_S / (args.load * cluster.total_gpus)
    frame = synthetic_trace(args.jobs, args.seed, MODELS, gap_s)
    jobs = jobs_from_frame(frame, None, "synthetic trace")
    print(f"{len(jobs):,} jobs on {cluster.total_gpus:,} GPUs ({args.cluster}), mean gap {gap_s:.2f} s, "
          f"offered load {args.load:.0%} (consolidated run times)")  # fmt: skip
    fixed = {
        "delay": Policy("delay", delay_s=600.0),
        "network-delay": Policy("network-delay", scale=1.0),
        "network-preempt": Policy("network-preempt", scale=1.0),
    }
    for scenario in args.scenarios.split(","):
        if scenario == "congested":
            fabric = Fabric.oversubscribed(args.node_gbps, args.oversubscription, cluster.nodes_per_switch,
                                           args.reference_gbps)  # fmt: skip
            print(f"congested: {fabric.label()} ({args.oversubscription:g}:1 oversubscribed)")
        else:  # plain (choice_list took nothing else)
            fabric = None
            print("plain: no fabric, crossing more switches than needed doubles the network stall")
        print(f"  {'policy':<22}{'wall s':>8}{'cpu s':>7}{'makespan h':>12}{'avg JCT h':>11}{'p95 JCT h':>11}"
              f"{'queue h':>9}{'comm h':>9}{'spread':>8}{'preempt':>9}{'GPU busy':>10}")  # fmt: skip
        for name in args.policies.split(","):
            policy = fixed.get(name) or Policy(name)
            began, cpu_began = time.perf_counter(), time.process_time()
            outcomes = simulate(jobs, cluster, policy, fabric=fabric)
            wall_s, cpu_s = time.perf_counter() - began, time.process_time() - cpu_began
            m = schedule_metrics(outcomes, cluster)
            print(f"  {policy.label():<22}{wall_s:>8.1f}{cpu_s:>7.1f}{m['makespan_s'] / 3600:>12.1f}"
                  f"{m['avg_jct_s'] / 3600:>11.2f}{m['p95_jct_s'] / 3600:>11.2f}"
                  f"{m['avg_queue_s'] / 3600:>9.2f}"
                  f"{m['comm_overhead_s'] / 3600:>9.1f}{m['spread_jobs']:>8}{m['preemptions']:>9}"
                  f"{m['gpu_busy_share']:>10.0%}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
