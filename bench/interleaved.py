"""Time two versions of one loop in interleaved blocks, so that drift in the machine's load hits both alike.

    plain_s, timed_s, ratios = interleaved_blocks(plain, timed, block, pairs)
    print_comparison("plain loop", "instrumented", plain_s, timed_s, ratios)

`plain` and `timed` each run `block` iterations; pairs alternate their order (plain first, then timed first).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from stash_core.analysis.stats import mean_ci95


def interleaved_blocks(plain: Callable[[], None], timed: Callable[[], None], block: int,
                       pairs: int) -> tuple[list[float], list[float], list[float]]:  # fmt: skip
    """Seconds per iteration of each block of plain and of timed, and their ratio per pair."""
    plain_s, timed_s, ratios = [], [], []
    for pair in range(pairs):
        order = (("plain", plain), ("timed", timed))
        block_s = {}
        for kind, run in order if pair % 2 == 0 else reversed(order):
            start = time.perf_counter()
            run()
            block_s[kind] = (time.perf_counter() - start) / block
        plain_s.append(block_s["plain"])
        timed_s.append(block_s["timed"])
        ratios.append(block_s["timed"] / block_s["plain"])
    return plain_s, timed_s, ratios


def print_comparison(plain_name: str, timed_name: str, plain_s: list[float], timed_s: list[float],
                     ratios: list[float]) -> None:  # fmt: skip
    """Means with their 95% intervals, the slowdown ratio, the time added, and the robust figures."""
    width = max(len(plain_name), len(timed_name), len("slowdown ratio")) + 2
    plain_mean, plain_ci = mean_ci95(plain_s)
    timed_mean, timed_ci = mean_ci95(timed_s)
    ratio, ratio_ci = mean_ci95(ratios)
    print(f"{plain_name:<{width}}{plain_mean * 1e3:8.3f} ms/iteration ± {plain_ci * 1e3:.3f}")
    print(f"{timed_name:<{width}}{timed_mean * 1e3:8.3f} ms/iteration ± {timed_ci * 1e3:.3f}")
    print(f"{'slowdown ratio':<{width}}{ratio:.4f} ± {ratio_ci:.4f}  ({(ratio - 1) * 100:+.2f}%)")
    added_s, added_ci = mean_ci95([timed - plain for timed, plain in zip(timed_s, plain_s, strict=True)])
    print(f"{'added':<{width}}{added_s * 1e6:8.1f} us/iteration ± {added_ci * 1e6:.1f}")
    best_plain_s, best_timed_s = min(plain_s), min(timed_s)  # the blocks least disturbed by other processes
    print(
        f"{'fastest blocks':<{width}}{best_plain_s * 1e3:.3f} vs {best_timed_s * 1e3:.3f} ms/iteration "
        f"({(best_timed_s / best_plain_s - 1) * 100:+.2f}%, {(best_timed_s - best_plain_s) * 1e6:+.1f} us)"
    )
    median = statistics.median(ratios)  # robust to a block another process slowed down
    print(f"{'median ratio':<{width}}{median:.4f}  ({(median - 1) * 100:+.2f}%)")


if __name__ == "__main__":  # a helper module: what it is, where it is run from
    raise SystemExit("bench/interleaved.py is a helper the benchmarks import (bench/overhead.py and others); "
                     "run one of those")
