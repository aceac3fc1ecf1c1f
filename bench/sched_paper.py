"""The seed paper's experiment (Sharma et al., arXiv 2401.16492: up to 69% better makespan, 83% lower
average JCT and 98% less communication overhead than consolidation-based scheduling under congested
networks), run on Stash's simulator: `bench/schedule.py --paper`.

A Philly-like heavy trace (stash_core/sched/generate.py: 1-32 GPUs, heavy-tailed durations, diurnal
arrivals, per-model gradient bytes and iteration times) at `load` of a congested cluster: node uplinks of
10 Gbit/s, switch uplinks 4:1 oversubscribed, the trace's slowdowns (Blox's penalties) read at 25 Gbit/s,
so every spread job communicates 2.5 times slower than where its slowdown was measured, before sharing.
Two workloads: continuous (diurnal Poisson) arrivals and a batch (every job at 0, makespan = training all
jobs). Timers as given (delay 600 s, network scale 1; durations the scheduler uses are estimates from the
history of finished jobs). It prints the figures and the gains it finds; it asserts nothing. With `seeds`
above 1 it runs that many traces and ends with each figure's and gain's mean and 95% interval over them (a
Student t interval over the traces): one trace's order of the policies is not a finding.
"""

from __future__ import annotations

import math
import sys
import time
from collections import defaultdict

from stash_core.analysis.stats import t_quantile_975
from stash_core.sched import Cluster, Policy, jobs_from_frame, simulate
from stash_core.sched.fabric import Fabric
from stash_core.sched.generate import philly_like_trace, philly_mean_gpu_s
from stash_core.sched.metrics import schedule_metrics

NODE_GBPS, OVERSUBSCRIPTION, REFERENCE_GBPS = 10.0, 4.0, 25.0
POLICIES = {
    "fifo-consolidate": Policy("fifo-consolidate"),
    "consolidate": Policy("consolidate"),
    "spread": Policy("spread"),
    "delay": Policy("delay", delay_s=600.0),
    "network-delay": Policy("network-delay", scale=1.0),
    "network-preempt": Policy("network-preempt", scale=1.0),
}
METRICS = ("makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "comm_overhead_s")


def paper(
    jobs: int = 2000, cluster: str = "8x4x8", load: float = 0.8, seed: int = 0, seeds: int = 1
) -> None:
    shape = Cluster(*(int(v) for v in cluster.split("x")))
    fabric = Fabric.oversubscribed(NODE_GBPS, OVERSUBSCRIPTION, shape.nodes_per_switch, REFERENCE_GBPS)
    gap_s = philly_mean_gpu_s() / (load * shape.total_gpus)
    figures: dict[tuple[str, str, str], list[float]] = defaultdict(list)  # (arrivals, policy, figure)
    for each in range(seed, seed + seeds):
        print(f"Philly-like trace, {jobs:,} jobs (seed {each}) on {shape.total_gpus} GPUs ({cluster}); "
              f"{fabric.label()}")  # fmt: skip
        _one_trace(jobs, each, gap_s, load, shape, fabric, figures)
    if seeds > 1:
        _over_seeds(figures, seeds)


def _one_trace(jobs, seed, gap_s, load, shape, fabric, figures) -> None:
    """One trace's tables, and its figures and gains added to `figures`."""
    for arrivals in ("poisson", "batch"):
        frame = philly_like_trace(jobs, seed, gap_s, arrivals)
        trace = jobs_from_frame(frame, None, "Philly-like trace")
        what = f"continuous arrivals (diurnal Poisson, mean gap {gap_s:.0f} s, offered load {load:.0%})" \
            if arrivals == "poisson" else "batch: every job at 0"  # fmt: skip
        print(f"\n{what}")
        print(f"  {'policy':<18}{'wall s':>7}{'makespan h':>12}{'avg JCT h':>11}{'p95 JCT h':>11}"
              f"{'queue h':>9}{'comm h':>10}{'spread':>8}{'preempt':>9}")  # fmt: skip
        results = {}
        for name, policy in POLICIES.items():
            began = time.perf_counter()
            outcomes = simulate(trace, shape, policy, fabric=fabric)
            wall_s = time.perf_counter() - began
            m = results[name] = schedule_metrics(outcomes, shape)
            print(f"  {name:<18}{wall_s:>7.1f}{m['makespan_s'] / 3600:>12.1f}{m['avg_jct_s'] / 3600:>11.2f}"
                  f"{m['p95_jct_s'] / 3600:>11.2f}{m['avg_queue_s'] / 3600:>9.2f}"
                  f"{m['comm_overhead_s'] / 3600:>10.1f}{m['spread_jobs']:>8}{m['preemptions']:>9}",
                  flush=True)  # fmt: skip
        base, spread = results["fifo-consolidate"], results["spread"]
        for name in ("delay", "network-delay", "network-preempt"):
            m = results[name]
            print(f"  {name}: makespan {_gain(base['makespan_s'], m['makespan_s'])}, average JCT "
                  f"{_gain(base['avg_jct_s'], m['avg_jct_s'])} against fifo-consolidate; average JCT "
                  f"{_gain(results['consolidate']['avg_jct_s'], m['avg_jct_s'])} against consolidate; "
                  f"communication overhead {_gain(spread['comm_overhead_s'], m['comm_overhead_s'])} against "
                  "spread")  # fmt: skip
        for name, m in results.items():
            for metric in METRICS:
                figures[arrivals, name, metric].append(m[metric] / 3600)
            for metric, against, baseline in (("makespan_s", base, "fifo-consolidate"),
                                               ("avg_jct_s", base, "fifo-consolidate"),
                                               ("comm_overhead_s", spread, "spread")):  # fmt: skip
                # no gain of a baseline against itself, nor a communication saving of a policy that never
                # spreads a job
                spreads = metric != "comm_overhead_s" or m["spread_jobs"] > 0
                if name != baseline and against[metric] > 0 and spreads:
                    figures[arrivals, name, f"{metric} gain"].append(1 - m[metric] / against[metric])


def _over_seeds(figures: dict[tuple[str, str, str], list[float]], seeds: int) -> None:
    """Each figure's mean and 95% interval over the traces, and each gain's (each trace's own gain)."""
    print(f"\nover {seeds} traces: mean ± 95% interval (Student t over the traces)")
    for arrivals in ("poisson", "batch"):
        print(f"\n{'continuous arrivals' if arrivals == 'poisson' else 'batch'}")
        print(f"  {'policy':<18}{'makespan h':>16}{'avg JCT h':>16}{'comm h':>18}"
              f"{'makespan vs fifo-cons.':>26}{'avg JCT vs fifo-cons.':>25}"
              f"{'comm vs spread':>20}")  # fmt: skip
        for name in POLICIES:
            shown = ("makespan_s", "avg_jct_s", "comm_overhead_s")
            forms = {"makespan_s": "{:.1f}", "avg_jct_s": "{:.2f}", "comm_overhead_s": "{:.1f}"}
            cells = [_spread(figures[arrivals, name, metric], forms[metric]) for metric in shown]
            gains = [_spread([100 * g for g in figures.get((arrivals, name, f"{metric} gain"), [])],
                             "{:+.0f}%") for metric in shown]  # fmt: skip
            print(f"  {name:<18}{cells[0]:>16}{cells[1]:>16}{cells[2]:>18}{gains[0]:>26}{gains[1]:>25}"
                  f"{gains[2]:>20}")  # fmt: skip
    print("  (a gain: how much lower than the baseline, each trace's own; + lower, - higher)")


def _spread(values: list[float], form: str) -> str:
    if not values:
        return "-"
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return form.format(mean)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = t_quantile_975(len(values) - 1) * sd / math.sqrt(len(values))
    return f"{form.format(mean)} ± {form.format(half).lstrip('+')}"


def _gain(before: float, after: float) -> str:
    if before <= 0:
        return "n/a (baseline 0)"
    change = 1 - after / before
    return f"{change:.0%} lower" if change >= 0 else f"{-change:.0%} higher"


if __name__ == "__main__":  # the experiment's options are schedule.py's: one command line, one place
    print(
        "sched_paper.py is run by schedule.py: python bench/schedule.py --paper [--jobs 2000] "
        "[--cluster 8x4x8] [--load 0.8] [--seed 0] [--seeds 1]",
        file=sys.stderr,
    )
    sys.exit(2)
