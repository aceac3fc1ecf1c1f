"""Where the launches of one run disagree: the variance between launches, split into what the launches' own
sampling explains and what is left (a true launch-to-launch effect), under each way of launching.

Each variant is one `stash profile` of compute and interconnect (R0 and R1 only) with K rounds of launches,
on the README's first example (resnet10, batch 16, 3x32x32, 2 workers). Per run it prints:

  mean_s        the mean of the launches' means
  between %     the relative standard deviation of the launches' means
  sampling %    what the launches' own intervals predict for it (their standard errors, in quadrature)
  launch %      sqrt(between^2 - sampling^2): the part sampling does not explain (0 when it explains all)
  first %       the first launch against the mean of the others (a warm-up left in the first launch)
  trend %/l     least-squares slope of the launch means per launch (drift over the profile)
  others        other processes' CPU during the launches, in cores (mean and most), measured
  kept          iterations kept per launch (mean)
  lag1          lag-1 autocorrelation of the iterations within a launch (near 1: the level shifts inside it)
and per variant the interconnect stall (R1 - R0 over the paired rounds) with its interval and the wall time;
last, the same fixed work (a pure-Python loop) timed 25 times: the machine's own steadiness, without Stash.

    .venv/bin/python bench/launch_variance.py [--launches 6] [--variants unpinned,pinned,pinned-long]

Run it alone on the machine (2 cores): any other load is in its figures, and it prints the load it measured.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_args import bench_parser, choice_list, positive_int  # noqa: E402

from stash_core.engine.launches import slope, within_launch_lag1  # noqa: E402

BASE = [
    "--model",
    "resnet10",
    "--batch-size",
    "16",
    "--input-shape",
    "3,32,32",
    "--workers",
    "2",
    "--stalls",
    "compute,interconnect",
    "--target-ci",
    "0.1",
    "--progress",
    "none",
    "--no-probes",
    "--paired",
    "off",
]  # fmt: skip  (R0 and R1 launched apart: how their launches disagree is measured)
# name -> the options that make the variant (K rounds are added: --launches K)
VARIANTS = {
    "unpinned": ["--no-pin"],
    "pinned": [],
    "unpinned-long": ["--no-pin", "--iterations", "{long}"],
    "pinned-long": ["--iterations", "{long}"],
}
LONG_ITERATIONS_PER_LAUNCH = 40


def run_variant(name: str, launches: int, workdir: Path) -> tuple[dict, float]:
    options = [o.format(long=LONG_ITERATIONS_PER_LAUNCH * launches) for o in VARIANTS[name]]
    out = workdir / f"{name}.json"
    command = [sys.executable, "-m", "stash_core", "profile", *BASE, "--launches", str(launches),
               "--max-phase-seconds", str(20 * launches), "--db", str(workdir / f"{name}.duckdb"),
               "--out", str(out), *options]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text()), time.monotonic() - started


def run_rows(doc: dict) -> list[dict]:
    rows = []
    for phase in doc["phases"]:
        launches = phase.get("launches") or []
        means = [launch["mean_s"] for launch in launches]
        if len(means) < 2:
            continue
        mean_s = sum(means) / len(means)
        between = statistics_sd(means) / mean_s
        sampling = (
            math.sqrt(sum((launch["ci95_s"] / 1.96) ** 2 for launch in launches) / len(launches)) / mean_s
        )
        rows.append(
            {
                "run": phase["name"],
                "mean_s": mean_s,
                "between": between,
                "sampling": sampling,
                "launch": math.sqrt(max(0.0, between**2 - sampling**2)),
                "first": means[0] / (sum(means[1:]) / len(means[1:])) - 1,
                "trend": slope(means) / mean_s,
                "kept": sum(launch["iterations"] for launch in launches) / len(launches),
                "lag1": within_launch_lag1(phase) or float("nan"),
                "loads": [launch.get("other_cores") for launch in launches],
            }
        )
    return rows


def statistics_sd(values: list[float]) -> float:
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def interconnect_of(doc: dict) -> str:
    stall = ((doc.get("breakdown") or {}).get("stalls") or {}).get("interconnect")
    if not stall or not stall.get("seconds"):
        return "interconnect: not measured"
    value, ci = stall["seconds"], stall.get("ci95_s") or float("nan")
    return f"interconnect {value:.4f} s ± {ci:.4f} ({ci / value:.1%})"


def fixed_work_spread(repeats: int = 25) -> str:
    """The machine's own steadiness, without Stash: the same pure-Python loop timed `repeats` times. A spread
    here is the machine's (a shared or throttled CPU), and no launch order or placement removes it."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        times.append(time.perf_counter() - started)
    mean_s = sum(times) / len(times)
    return (f"fixed work (a pure-Python loop, {repeats} times): mean {mean_s:.3f} s, sd "
            f"{statistics_sd(times) / mean_s:.1%}, min {min(times):.3f} s, max {max(times):.3f} s")  # fmt: skip


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--launches", type=positive_int, default=6)
    parser.add_argument("--variants", type=choice_list(VARIANTS), default=",".join(VARIANTS))
    args = parser.parse_args()
    names = [name for name in args.variants.split(",") if name]
    print(
        f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; {args.launches} rounds each"
    )
    header = (f"{'variant':<14} {'run':<4} {'mean_s':>8} {'between':>8} {'sampling':>9} {'launch':>7} "
              f"{'first':>7} {'trend/l':>8} {'others':>12} {'kept':>5} {'lag1':>5}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="stash-launch-variance-") as tmp:
        for name in names:
            doc, wall_s = run_variant(name, args.launches, Path(tmp))
            print(header)
            for row in run_rows(doc):
                loads = [x for x in row["loads"] if x is not None]
                others = f"{sum(loads) / len(loads):.2f}/{max(loads):.2f}" if loads else "-"
                print(f"{name:<14} {row['run']:<4} {row['mean_s']:8.4f} {row['between']:8.1%} "
                      f"{row['sampling']:9.1%} {row['launch']:7.1%} {row['first']:+7.1%} {row['trend']:+8.2%} "
                      f"{others:>12} {row['kept']:5.0f} {row['lag1']:5.2f}")  # fmt: skip
            print(f"{name:<14} {interconnect_of(doc)}; wall {wall_s:.0f} s")
    print(fixed_work_spread())
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
