"""What the warm-up cut costs and saves: the worker's stopping rule on simulated step times.

The worker's own loop (measure/worker.run_until_done) runs on steps of 0.1 s with Gaussian noise, some with
slow first steps after the two always dropped, as a CPU run beside another job showed (0.80, 0.51, 1.47,
1.04 s, then 0.08 s). For each case and each warm-up rule, over many seeds: the steps the rule stopped
after, and the bias of the kept steps' mean against the true 0.1 s.

- "MSER-5 only": no cut on fewer than 20 steps (four batches of five): the rule before MSER-1 was added;
- "MSER-1 below 20": stats.mser_truncation as it is, single samples judged on a short series.

No process is started and nothing is timed: the figures are the rule's, exact for the simulated series.

    .venv/bin/python bench/warmup_cut.py [--seeds 300]
"""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_args import bench_parser, positive_int  # noqa: E402

from stash_core.analysis import stats  # noqa: E402
from stash_core.measure import rank_sync, worker  # noqa: E402
from stash_core.measure.timed_loop import StepTimes  # noqa: E402

STEP_S = 0.1
NOISE = 0.05  # relative standard deviation of a step
CURRENT = stats.mser_truncation
# (label, fixed count or None for auto, extra time of the first steps as a share of STEP_S)
CASES = (
    ("auto, no warm-up", None, []),
    ("auto, 4 slow steps", None, [0, 0, 7, 4, 13, 9]),
    ("--iterations 10, no warm-up", 10, []),
    ("--iterations 10, 4 slow steps", 10, [0, 0, 7, 4, 13, 9]),
    ("--iterations 10, 1 step +50%", 10, [0, 0, 0.5]),
)


def mser5_only(values: list[float], batch: int = stats.MSER_BATCH) -> int:
    return 0 if len(values) // batch < 4 else CURRENT(values, batch)


def use(rule) -> None:
    """Every place the stopping rule reads the cut from."""
    stats.mser_truncation = worker.mser_truncation = rank_sync.mser_truncation = rule


def one_run(seed: int, fixed: int | None, slow: list[float]) -> tuple[int, float]:
    rng = random.Random(seed)

    def steps(model, optimizer, loss, batches, device, count, times, clock) -> None:
        for _ in range(count):
            i = len(times.iteration_s)
            extra = slow[i] if i < len(slow) else 0.0
            times.iteration_s.append(STEP_S * (1 + extra) * (1 + rng.gauss(0, NOISE)))

    worker.run_steps = steps
    worker.report_progress = lambda *args: None
    job = {"iterations": fixed, "target_relative_ci": 0.02, "max_phase_s": 60.0, "max_iterations": 5000}
    step_s: list[float] = []
    reason = worker.run_until_done(job, None, None, None, None, "cpu", StepTimes(), step_s, None, 0)
    cut = rank_sync.warmup_count(step_s, fixed if reason == "fixed" else None)
    return len(step_s), statistics.mean(step_s[cut:]) / STEP_S - 1


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--seeds", type=positive_int, default=300)
    args = parser.parse_args()
    print(f"{'case':32s} {'rule':16s} {'steps (median, mean)':>22s} {'bias of the kept mean':>22s}")
    for label, fixed, slow in CASES:
        for name, rule in (("MSER-5 only", mser5_only), ("MSER-1 below 20", CURRENT)):
            use(rule)
            runs = [one_run(seed, fixed, slow) for seed in range(args.seeds)]
            counts = [count for count, _ in runs]
            bias = statistics.mean(bias for _, bias in runs)
            print(f"{label:32s} {name:16s} {statistics.median(counts):10.1f} {statistics.mean(counts):10.1f} "
                  f"{bias:+21.2%}")
    use(CURRENT)


if __name__ == "__main__":
    main()
