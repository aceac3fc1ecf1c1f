"""What a local launch costs before its workers can step: torchrun started anew against forked from the warm
starter (launch/warm_start.py).

Each launch runs torchrun with 2 forked workers of a module that only joins the process group (gloo), syncs
once and exits, so its wall time is the launch's own cost: the supervisor or the server, torchrun's import
and rendezvous, the fork, the process group, the teardown. The two ways alternate launch by launch so that
both see the same machine; the script prints each one's median and spread, and the saving per launch.
Timing-sensitive: run it alone on the machine.

    .venv/bin/python bench/launch_startup.py [--launches 8]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_args import bench_parser, positive_int, spread_text  # noqa: E402

from stash_core.launch import warm_start  # noqa: E402
from stash_core.launch.local import TORCHRUN_MODULE, run_local  # noqa: E402
from stash_core.launch.runner import worker_env  # noqa: E402
from stash_core.launch.torchrun import FORK_OPTION  # noqa: E402

WORKER = """\
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == 0:
    print("joined", flush=True)
dist.destroy_process_group()
"""


def launch_s(argv: list[str], env: dict[str, str]) -> float:
    lines: list[str] = []
    started = time.monotonic()
    failure = run_local(argv, lines.append, timeout_s=120, env=env)
    if failure or "joined" not in lines:
        raise SystemExit(f"a launch failed: {failure or lines[-5:]}")
    return time.monotonic() - started


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--launches", type=positive_int, default=8, help="launches of each way (default 8)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stash-startup-") as folder:
        Path(folder, "startup_worker.py").write_text(WORKER)
        env = {**worker_env(1), "PYTHONPATH": os.pathsep.join([folder, str(REPO)])}
        argv = [sys.executable, "-m", TORCHRUN_MODULE, "--standalone", "--nnodes", "1",
                "--nproc-per-node", "2", "--max-restarts", "0", FORK_OPTION, "startup_worker"]  # fmt: skip
        anew: list[float] = []
        forked: list[float] = []
        server_s = time.monotonic()
        with warm_start.warm_launches(env) as starter:
            first = launch_s(argv, env)  # waits for the server's own import once
            print(f"server's first launch (its import included): {first:.2f} s, "
                  f"{time.monotonic() - server_s:.2f} s after the server started")  # fmt: skip
            for index in range(args.launches):
                for way in ("anew", "forked") if index % 2 == 0 else ("forked", "anew"):
                    if way == "anew":
                        with warm_start.launches_anew():
                            anew.append(launch_s(argv, env))
                    else:
                        forked.append(launch_s(argv, env))
                    print(f"launch {index + 1} {way:>6}: {(anew if way == 'anew' else forked)[-1]:.2f} s")
            if starter.broken:
                raise SystemExit("the warm starter failed: its launches started anew")
    load = os.getloadavg()[0]
    print(f"\n{args.launches} launches each way, 2 forked workers (gloo), alternating; "
          f"load average {load:.2f}")  # fmt: skip
    for way, values in (("anew", anew), ("forked", forked)):
        spread = spread_text(values) + (" s" if len(values) > 1 else "")  # one launch: n/a, not 0.00
        print(f"  {way:>6}: median {statistics.median(values):.2f} s, mean {statistics.mean(values):.2f} "
              f"s, sd {spread}, range {min(values):.2f}-{max(values):.2f} s")  # fmt: skip
    saving = statistics.median(anew) - statistics.median(forked)
    print(f"  saving per launch: {saving:.2f} s (median against median)")


if __name__ == "__main__":
    main()
