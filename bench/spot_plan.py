"""How long spotDNN's searches take over large quotas: a plan, a re-plan, and a simulated training that
re-plans after every revocation of a trace.

    PYTHONPATH=. .venv/bin/python bench/spot_plan.py [--types 7] [--quota 40] [--revocations 300] [--repeat 3]

The offer: `--types` instance types (1 to 4 GPUs, compute 0.5 s and up, $0.30/h and up) with `--quota` each,
on examples/workload.json's model. Timed, each `--repeat` times (median and range): the plan (`stash spot`'s
search) and a re-plan with 5 instances running, both as spotDNN plans (with contention: its bound keeps
clusters small) and without contention (no worker bound: every window up to the whole offer, the heaviest
search, which `spot-simulate`'s "no contention" strategy runs); then one `spot-simulate` over a trace of
`--revocations` revocations (every strategy's first run, which no work limit stops). Prints the clusters each
search weighed beside its time. Prints figures; asserts nothing (a timing depends on the machine and its
load).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench_args import bench_parser, positive_int

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stash_core.spot.model import Worker, Workload  # noqa: E402
from stash_core.spot.planner import InstanceOffer, plan_spot_cluster  # noqa: E402
from stash_core.spot.replan import replan  # noqa: E402
from stash_core.spot.simulate import simulate, without_contention  # noqa: E402

# examples/workload.json's model (spotDNN's ResNet-110 on CIFAR-10); the links as `stash spot` defaults them
WORKLOAD = Workload(param_bytes=11.54e6, solo_bandwidth_Bps=142e6 / 8, contention_a1=0.8, contention_b1=-1.92,
                    loss_g=(876.5, -0.2, 1903.6, 1.0, 0.5))  # fmt: skip
LINKS = {"ps_Bps": 9.6e9 / 8, "pcie_Bps": 80e9 / 8}
TARGET_LOSS, DEADLINE_S = 0.8, 2600.0


def offer(types: int, quota: int) -> list[InstanceOffer]:
    return [
        InstanceOffer(Worker(f"t{m}", 1 + m % 4, 0.5 + 0.1 * m, 512 * (1 + m % 4), 0.3 + 0.2 * m), quota)
        for m in range(types)
    ]


def timed(repeat: int, work: Callable[[], object]) -> tuple[list[float], object]:
    seconds, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def say(what: str, seconds: list[float], clusters: int) -> None:
    spread = f"range {min(seconds):.3f}-{max(seconds):.3f}, {len(seconds)} runs"
    median = statistics.median(seconds)
    print(f"{what:<32} median {median:7.3f} s ({spread})  {clusters:,} candidate clusters")


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--types", type=positive_int, default=7)
    parser.add_argument("--quota", type=positive_int, default=40)
    parser.add_argument("--revocations", type=positive_int, default=300)
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args()
    offers = offer(args.types, args.quota)
    print(f"{args.types} types x quota {args.quota}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    running = [offers[0].worker] * 3 + [offers[min(2, len(offers) - 1)].worker] * 2
    for name, workload in (("spotDNN", WORKLOAD), ("no contention", without_contention(WORKLOAD))):
        seconds, planned = timed(args.repeat, lambda w=workload: plan_spot_cluster(
            offers, w, TARGET_LOSS, DEADLINE_S, **LINKS))  # fmt: skip
        say(f"plan, {name} ({planned.search})", seconds, len(planned.candidates))
        seconds, again = timed(args.repeat, lambda w=workload: replan(
            running, offers, w, TARGET_LOSS, 5.0, DEADLINE_S - 600, **LINKS))  # fmt: skip
        say(f"re-plan, {name} ({again.search})", seconds, len(again.candidates))
    names = [o.worker.instance for o in offers[:3]]
    trace = [(20.0 * k, names[k % len(names)]) for k in range(args.revocations)]
    start = time.perf_counter()
    rows = simulate(offers, offers, WORKLOAD, TARGET_LOSS, DEADLINE_S, **LINKS, trace=trace)
    elapsed = time.perf_counter() - start
    replans = ", ".join(f"{row['strategy']} {row['mean_revocations']:.0f}" for row in rows)
    print(f"spot-simulate over the trace: {elapsed:.1f} s (one run each; re-plans: {replans})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
