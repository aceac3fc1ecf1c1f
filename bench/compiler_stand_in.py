"""What the compiler's stand-in (zoo/compiler_guards.py) saves a measuring worker on the CPU, and what it
costs its timed loop. In new interpreters, alternately with the real compiler and with the stand-in: the CPU
seconds from a built model to the end of its first step (DDP over a gloo group of one, SGD with momentum:
what a worker does before its timed loop; the compiler's import included where it is imported), then the
median time of a training iteration (zero_grad, forward, backward, step of a small MLP on one thread) over
ROUNDS rounds of ITERATIONS. Prints each pair, the medians of all with their range over the runs, and the
per-pair difference (the first step's CPU seconds saved, the iteration's ratio) with its median and range.
Run: PYTHONPATH=. .venv/bin/python bench/compiler_stand_in.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_args import bench_parser

REPO = Path(__file__).resolve().parent.parent
PAIRS = 5
ROUNDS, ITERATIONS = 15, 300

WORKER = """
import json, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from stash_core.zoo.compiler_guards import compiler_unimported

torch.set_num_threads(1)
iterations, rounds = int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
x = torch.randn(32, 64)
started = time.process_time()
if sys.argv[1] == "real":
    import torch._dynamo  # what every launch paid before (torchrun's agent, before it forked the workers)
with compiler_unimported():
    model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()

    step()
    first_step_cpu_s = time.process_time() - started
    for _ in range(iterations):
        step()
    round_s = []
    for _ in range(rounds):
        begun = time.perf_counter()
        for _ in range(iterations):
            step()
        round_s.append((time.perf_counter() - begun) / iterations)
print(json.dumps({"first_step_cpu_s": first_step_cpu_s, "iteration_s": sorted(round_s)[rounds // 2]}))
"""


def run(mode: str, folder: Path) -> dict:
    store = folder / f"{mode}-{len(list(folder.iterdir()))}"
    done = subprocess.run(
        [sys.executable, "-c", WORKER, mode, str(store), str(ITERATIONS), str(ROUNDS)],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    figures: dict[str, list[dict]] = {"real": [], "stand-in": []}
    with tempfile.TemporaryDirectory() as folder:
        for pair in range(PAIRS):
            for mode in figures:
                figures[mode].append(run(mode, Path(folder)))
            real, served = figures["real"][-1], figures["stand-in"][-1]
            firsts = f"{real['first_step_cpu_s']:.3f} / {served['first_step_cpu_s']:.3f}"
            iterations = f"{real['iteration_s'] * 1e3:.3f} / {served['iteration_s'] * 1e3:.3f}"
            print(f"pair {pair + 1}: first step {firsts} CPU-s, iteration {iterations} ms (real / stand-in)")
    summarise(figures)


def summarise(figures: dict[str, list[dict]]) -> None:
    """Each mode's medians with their range over the runs, then the per-pair difference with its own."""
    for mode, rows in figures.items():
        first = median_range([row["first_step_cpu_s"] for row in rows])
        iteration = median_range([row["iteration_s"] for row in rows], 1e3)
        print(f"{mode:>9}: median first step {first} CPU-s, median iteration {iteration} ms "
              "(range over the runs)")  # fmt: skip
    pairs = list(zip(figures["real"], figures["stand-in"], strict=True))
    saved = [real["first_step_cpu_s"] - served["first_step_cpu_s"] for real, served in pairs]
    ratios = [served["iteration_s"] / real["iteration_s"] for real, served in pairs]
    print(f"per pair: first step {median_range(saved)} CPU-s saved, iteration stand-in / real "
          f"{median_range(ratios)} (median, range over {len(pairs)} pairs)")  # fmt: skip


def median_range(values: list[float], scale: float = 1.0) -> str:
    """The median and the range of `values` (times `scale`): 'median (low to high)'."""
    low, high = min(values) * scale, max(values) * scale
    return f"{statistics.median(values) * scale:.3f} ({low:.3f} to {high:.3f})"


if __name__ == "__main__":
    bench_parser(__doc__).parse_args()  # no options: --help, or a refusal of any argument
    main()
