"""Do the reported 95% intervals hold from one launch to the next? Coverage under a varying background load.

Repeats one small profile (a tiny CNN on the CPU, 2 workers, the compute and interconnect stalls: runs R0 and
R1) several times with one launch per run (--launches 1, the old behaviour) and with the default launches per
run, alternating the two so that both see the same load. A background process started here loads one core
with a duty cycle that drifts between about 0% and 100% over a period of PERIOD_S seconds, so that the machine
changes between launches the way a shared machine does; it is stopped by its pid at the end.

The "true" value of each stall is its mean over every repetition of both settings; the script prints how
often each setting's reported interval holds it (goal: about 95%), the median interval, and the profiling
time each setting costs. Timing-sensitive: run it alone on the machine where you can.

    .venv/bin/python bench/intervals.py [--repetitions 7] [--max-phase-seconds 6]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stash_core.engine.plan import DEFAULT_LAUNCHES  # noqa: E402

MODEL = [
    "--model",
    f"{REPO}/examples/models/tiny_cnn.py:make",
    "--input-shape",
    "3,32,32",
    "--batch-size",
    "8",
]
STALLS = ("compute", "interconnect")
PERIOD_S = 45.0

# The load: busy for duty x 100 ms of every 100 ms, the duty drifting as a sine of period PERIOD_S.
LOAD = f"""
import math, time
start = time.monotonic()
while True:
    now = time.monotonic()
    duty = 0.5 + 0.5 * math.sin(2 * math.pi * (now - start) / {PERIOD_S})
    end = now + 0.1 * duty
    while time.monotonic() < end:
        pass
    time.sleep(0.1 * (1 - duty))
"""


def profile(launches: int, max_phase_s: float, folder: Path, index: int) -> dict:
    out = folder / f"run-{launches}-{index}.json"
    argv = [
        sys.executable, "-m", "stash_core", "profile", *MODEL, "--workers", "2", "--loader-workers", "1",
        "--stalls", ",".join(STALLS), "--device", "cpu", "--max-phase-seconds", str(max_phase_s),
        "--launches", str(launches), "--no-store", "--progress", "none", "--out", str(out),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall_s = time.monotonic() - started
    if done.returncode != 0:  # a worker that failed under the load: counted, and the bench goes on
        print(f"profile failed ({done.returncode}): {done.stderr.strip().splitlines()[-1][:300]}", flush=True)
        return {"launches": launches, "wall_s": wall_s, "failed": True}
    doc = json.loads(out.read_text())
    stalls = doc["breakdown"]["stalls"]
    return {
        "launches": launches,
        "wall_s": wall_s,
        "rounds": max(len(phase.get("launches") or [None]) for phase in doc["phases"]),
        **{name: (stalls[name]["raw_s"], stalls[name]["ci95_s"]) for name in STALLS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=7, help="profiles per setting (default: 7)")
    parser.add_argument("--max-phase-seconds", type=float, default=6.0, help="cap per run (default: 6)")
    args = parser.parse_args()
    settings = (1, DEFAULT_LAUNCHES)
    load = subprocess.Popen([sys.executable, "-c", LOAD])
    results: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="stash-intervals-") as folder:
            for index in range(args.repetitions):
                for launches in settings if index % 2 == 0 else settings[::-1]:
                    result = profile(launches, args.max_phase_seconds, Path(folder), index)
                    results.append(result)
                    if result.get("failed"):
                        continue
                    figures = "  ".join(
                        f"{n} {result[n][0] * 1e3:7.2f} ± {result[n][1] * 1e3:6.2f} ms" for n in STALLS
                    )
                    print(
                        f"rep {index + 1}  launches {launches}  {figures}  [{result['rounds']} round(s), "
                        f"{result['wall_s']:.0f} s]",
                        flush=True,
                    )
    finally:
        os.kill(load.pid, signal.SIGTERM)
        load.wait()
    report(results, settings, args)


def report(results: list[dict], settings: tuple[int, ...], args) -> None:
    failed = [r["launches"] for r in results if r.get("failed")]
    if failed:
        print(f"\nfailed profiles (left out): {len(failed)}, with launches {failed}")
    results = [r for r in results if not r.get("failed")]
    truth = {name: statistics.fmean(r[name][0] for r in results) for name in STALLS}
    print(
        f"\n{args.repetitions} repetitions per setting, tiny CNN, 2 CPU workers, --max-phase-seconds "
        f"{args.max_phase_seconds:g}, background load drifting over {PERIOD_S:g} s"
    )
    print("true value = mean over all repetitions of both settings: " + ", ".join(
        f"{name} {truth[name] * 1e3:.2f} ms" for name in STALLS))  # fmt: skip
    print(
        f"{'launches':>9} {'stall':>13} {'covered':>9} {'median ± (ms)':>14} {'spread sd (ms)':>15} "
        f"{'profile s':>10} {'rounds':>7}"
    )
    for launches in settings:
        runs = [r for r in results if r["launches"] == launches]
        wall = statistics.fmean(r["wall_s"] for r in runs)
        rounds = statistics.fmean(r["rounds"] for r in runs)
        for name in STALLS:
            hits = sum(abs(r[name][0] - truth[name]) <= r[name][1] for r in runs if math.isfinite(r[name][1]))
            cis = statistics.median(r[name][1] for r in runs) * 1e3
            spread = statistics.stdev(r[name][0] for r in runs) * 1e3 if len(runs) > 1 else math.nan
            print(
                f"{launches:>9} {name:>13} {hits:>4}/{len(runs):<4} {cis:>14.2f} {spread:>15.2f} "
                f"{wall:>10.0f} {rounds:>7.1f}"
            )


if __name__ == "__main__":
    main()
