"""Do the reported 95% intervals hold from one launch to the next? Coverage under a varying background load.

Repeats one small profile (a tiny CNN on the CPU, 2 workers, the compute and interconnect stalls: runs R0 and
R1) several times in each setting, alternating the settings so that all see the same load:

- "separate": R0 and R1 launched separately, in the default rounds of launches (--paired off);
- "paired": R0 and R1 timed in one launch, in alternating blocks (--paired on, engine/paired.py);
- "one launch" (with --with-one-launch): one launch per run (--launches 1 --paired off), the oldest way.

A background process started here loads one core with a duty cycle that drifts between about 0% and 100%
over a period of PERIOD_S seconds, so that the machine changes between launches the way a shared machine
does; it is stopped by its pid at the end.

The "true" value of each stall is its mean over every repetition of every setting; the script prints how
often each setting's reported interval holds it (goal: about 95%), how often it holds the setting's own mean
(what it can hold if the setting measures a slightly different thing), the median interval, and the
profiling time each setting costs. Timing-sensitive: run it alone on the machine where you can.

    .venv/bin/python bench/intervals.py [--repetitions 7] [--max-phase-seconds 6] [--with-one-launch]
"""

from __future__ import annotations

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

from bench_args import bench_parser, positive_float, positive_int  # noqa: E402

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


SETTINGS = {
    "separate": ["--paired", "off"],
    "paired": ["--paired", "on"],
    "one launch": ["--paired", "off", "--launches", "1"],
}


def profile(setting: str, max_phase_s: float, folder: Path, index: int) -> dict:
    out = folder / f"run-{setting.replace(' ', '-')}-{index}.json"
    argv = [
        sys.executable, "-m", "stash_core", "profile", *MODEL, "--workers", "2", "--loader-workers", "1",
        "--stalls", ",".join(STALLS), "--device", "cpu", "--max-phase-seconds", str(max_phase_s),
        *SETTINGS[setting], "--no-store", "--progress", "none", "--out", str(out),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall_s = time.monotonic() - started
    if done.returncode != 0:  # a worker that failed under the load: counted, and the bench goes on
        print(f"profile failed ({done.returncode}): {done.stderr.strip().splitlines()[-1][:300]}", flush=True)
        return {"setting": setting, "wall_s": wall_s, "failed": True}
    doc = json.loads(out.read_text())
    stalls = doc["breakdown"]["stalls"]
    return {
        "setting": setting,
        "wall_s": wall_s,
        "rounds": max(len(phase.get("launches") or [None]) for phase in doc["phases"]),
        **{name: (stalls[name]["raw_s"], stalls[name]["ci95_s"]) for name in STALLS},
    }


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--repetitions", type=positive_int, default=7, help="profiles per setting (default: 7)"
    )
    parser.add_argument(
        "--max-phase-seconds", type=positive_float, default=6.0, help="cap per run (default: 6)"
    )
    parser.add_argument("--with-one-launch", action="store_true", help="also one launch per run")
    args = parser.parse_args()
    settings = ("separate", "paired", *(("one launch",) if args.with_one_launch else ()))
    load = subprocess.Popen([sys.executable, "-c", LOAD])
    results: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="stash-intervals-") as folder:
            for index in range(args.repetitions):
                for setting in settings if index % 2 == 0 else settings[::-1]:
                    result = profile(setting, args.max_phase_seconds, Path(folder), index)
                    results.append(result)
                    if result.get("failed"):
                        continue
                    figures = "  ".join(
                        f"{n} {result[n][0] * 1e3:7.2f} ± {result[n][1] * 1e3:6.2f} ms" for n in STALLS
                    )
                    print(
                        f"rep {index + 1}  {setting:<10}  {figures}  [{result['rounds']} launch(es) a run, "
                        f"{result['wall_s']:.0f} s]",
                        flush=True,
                    )
    finally:
        os.kill(load.pid, signal.SIGTERM)
        load.wait()
    report(results, settings, args)


def report(results: list[dict], settings: tuple[str, ...], args) -> None:
    failed = [r["setting"] for r in results if r.get("failed")]
    if failed:
        print(f"\nfailed profiles (left out): {len(failed)}: {failed}")
    results = [r for r in results if not r.get("failed")]
    if not results:
        raise SystemExit("every profile failed: no figures to report")
    truth = {name: statistics.fmean(r[name][0] for r in results) for name in STALLS}
    print(
        f"\n{args.repetitions} repetitions per setting ({DEFAULT_LAUNCHES} rounds of launches by default), "
        f"tiny CNN, 2 CPU workers, --max-phase-seconds {args.max_phase_seconds:g}, background load drifting "
        f"over {PERIOD_S:g} s"
    )
    print("true value = mean over all repetitions of all settings: " + ", ".join(
        f"{name} {truth[name] * 1e3:.2f} ms" for name in STALLS))  # fmt: skip
    print(
        f"{'setting':>10} {'stall':>13} {'covered':>9} {'own mean':>9} {'median ± (ms)':>14} "
        f"{'spread sd (ms)':>15} {'mean (ms)':>10} {'profile s':>10} {'launches':>9}"
    )
    for setting in settings:
        runs = [r for r in results if r["setting"] == setting]
        if not runs:
            continue
        wall = statistics.fmean(r["wall_s"] for r in runs)
        rounds = statistics.fmean(r["rounds"] for r in runs)
        for name in STALLS:
            own = statistics.fmean(r[name][0] for r in runs)
            finite = [r for r in runs if math.isfinite(r[name][1])]
            hits = sum(abs(r[name][0] - truth[name]) <= r[name][1] for r in finite)
            own_hits = sum(abs(r[name][0] - own) <= r[name][1] for r in finite)
            cis = statistics.median(r[name][1] for r in runs) * 1e3
            spread = statistics.stdev(r[name][0] for r in runs) * 1e3 if len(runs) > 1 else math.nan
            print(
                f"{setting:>10} {name:>13} {hits:>4}/{len(runs):<4} {own_hits:>4}/{len(runs):<4} "
                f"{cis:>14.2f} {spread:>15.2f} {own * 1e3:>10.2f} {wall:>10.0f} {rounds:>9.1f}"
            )


if __name__ == "__main__":
    main()
