"""Does Stash's CPU stall of a training script equal what the script's loading costs it?

A training script with a known loading cost: a Dataset that reads small .npy files and runs an FFT on each
(--files-per-step of them per optimizer step), a DataLoader without workers giving dict batches, AdamW and
gradient accumulation. The script runs plainly in two versions, interleaved (real, precomputed, then
precomputed, real, ...), its own clock timing its steady optimizer steps:

  real         reads and transforms its files at every step (all files in the page cache);
  precomputed  the same samples computed once before the loop: the Dataset returns them, the loader still
               samples and collates them (so the two differ in loading only).

The loading cost per step is real minus precomputed (mean over the rounds, with its 95% interval). Then
`stash profile --script` runs the same script (--data-dir, one worker, stalls compute and cpu: R0 and R3) and
its CPU stall (R3 - R0) is compared with that cost: the ratio, goal 1 within ±15%. Stash's R0 and R3 are
printed beside the plain precomputed and real steps, so a gap shows on which side it arises.

    python bench/script_input_cost.py [--rounds 3] [--steps 60] [--files-per-step 16] [--px 128]

Timing figures need a quiet machine: other load widens every interval.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
from bench_args import bench_parser, positive_float, positive_int

from stash_core.analysis.stats import mean_ci95

REPO = Path(__file__).resolve().parents[1]
BATCH = 4
GOAL = 0.15  # the ratio's goal: 1 within ±15%

SCRIPT = """
import json, sys, time
from pathlib import Path
import numpy as np, torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
root, mode, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
ACCUMULATE, WARM = {accumulate}, 10

class Spectra(Dataset):
    def __init__(self, root, precomputed):
        self.files = sorted(Path(root).glob("*.npy"))
        self.cache = [self.load(i) for i in range(len(self.files))] if precomputed else None
    def __len__(self):
        return len(self.files)
    def load(self, index):
        image = np.load(self.files[index])
        spectrum = np.abs(np.fft.fft2(image)).astype(np.float32)
        return {{"x": torch.from_numpy(spectrum[:32].reshape(-1).copy()), "y": torch.tensor(index % 10)}}
    def __getitem__(self, index):
        return self.cache[index] if self.cache is not None else self.load(index)

dataset = Spectra(root, precomputed=mode == "precomputed")
features = dataset[0]["x"].numel()
loader = DataLoader(dataset, batch_size={batch}, shuffle=True, num_workers=0)
model = torch.nn.Sequential(torch.nn.Linear(features, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
step, start = 0, None
for epoch in range(10**6):
    for index, batch in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"]) / ACCUMULATE
        loss.backward()
        if (index + 1) % ACCUMULATE == 0:
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step == WARM:
                start = time.perf_counter()
            if limit and step == WARM + limit:
                print(json.dumps({{"step_s": (time.perf_counter() - start) / limit}}))
                sys.exit(0)
"""


def make_data(folder: Path, count: int, px: int) -> None:
    rng = np.random.default_rng(0)
    for index in range(count):
        np.save(folder / f"{index:05}.npy", rng.standard_normal((px, px)).astype(np.float32))


def plain_step_s(script: Path, data: Path, mode: str, steps: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script), str(data), mode, str(steps)], capture_output=True,
                          text=True, env=env, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])["step_s"]


def stash_profile(script: Path, data: Path, out: Path, max_phase_s: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "stash_core", "profile", "--script", str(script), "--data-dir", str(data),
        "--workers", "1", "--stalls", "compute,cpu", "--device", "cpu", "--no-store", "--out", str(out),
        "--progress", "none", "--max-phase-seconds", str(max_phase_s), "--", str(data), "stash", "0",
    ]  # fmt: skip
    subprocess.run(command, check=True, env=env, cwd=out.parent, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def parse_args():
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--rounds", type=positive_int, default=3, help="interleaved plain rounds (real + precomputed)"
    )
    parser.add_argument("--steps", type=positive_int, default=60, help="timed optimizer steps per plain run")
    parser.add_argument(
        "--files-per-step",
        type=positive_int,
        default=16,
        help=f"files read per optimizer step (a multiple of {BATCH})",
    )
    parser.add_argument("--px", type=positive_int, default=128, help="side of each .npy image (FFT cost)")
    parser.add_argument("--files", type=positive_int, default=512, help="files in the data set")
    parser.add_argument("--max-phase-seconds", type=positive_float, default=30.0, help="Stash's cap per run")
    args = parser.parse_args()
    # the script steps the optimizer every files-per-step / BATCH batches of one epoch: fewer files than
    # that would never step (and never end)
    if args.files_per_step % BATCH:
        parser.error(f"--files-per-step {args.files_per_step}: a multiple of the batch, {BATCH}")
    if args.files < args.files_per_step:
        parser.error(f"--files {args.files}: at least --files-per-step ({args.files_per_step})")
    return args


def half_text(half_s: float) -> str:
    """A 95% half-width in ms, or n/a where there is none (one round has no spread)."""
    return f"{half_s * 1e3:.2f}" if math.isfinite(half_s) else "n/a"


def interval_text(values_s: list[float]) -> str:
    """Mean in ms over the rounds and its 95% half-width."""
    mean_s, half_s = mean_ci95(values_s)
    return f"{mean_s * 1e3:8.2f} ms/step ± {half_text(half_s):>5}"


def ratio_ci95(top: float, top_half: float, bottom: float, bottom_half: float) -> tuple[float, float]:
    """top / bottom and its 95% half-width, the two relative half-widths added in quadrature (first order,
    the two measured apart); not finite where either is unknown."""
    if not bottom > 0:
        return float("nan"), float("nan")
    ratio = top / bottom
    relative = ((top_half / top) ** 2 + (bottom_half / bottom) ** 2) ** 0.5 if top else float("nan")
    return ratio, abs(ratio) * relative


def verdict(ratio: float, half: float, goal: float = GOAL) -> str:
    """Within or outside the goal 1 ± goal only when the whole 95% interval is; undecided when it straddles a
    bound of the goal or is unknown."""
    aim = f"the ±{goal:.0%} goal"
    if not (math.isfinite(ratio) and math.isfinite(half)):
        return f"undecided: no interval to hold against {aim}"
    low, high = ratio - half, ratio + half
    if 1 - goal <= low and high <= 1 + goal:
        return f"within {aim}"
    if high < 1 - goal or low > 1 + goal:
        return f"outside {aim}"
    return f"undecided: the interval straddles a bound of {aim}"


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="stash-input-cost-") as tmp:
        folder = Path(tmp)
        data = folder / "data"
        data.mkdir()
        make_data(data, args.files, args.px)
        script = folder / "train.py"
        script.write_text(
            textwrap.dedent(SCRIPT.format(accumulate=args.files_per_step // BATCH, batch=BATCH))
        )
        real, precomputed = [], []
        for round_index in range(args.rounds):
            order = ("real", "precomputed") if round_index % 2 == 0 else ("precomputed", "real")
            for mode in order:
                (real if mode == "real" else precomputed).append(plain_step_s(script, data, mode, args.steps))
        doc = stash_profile(script, data, folder / "result.json", args.max_phase_seconds)
    differences = [r - p for r, p in zip(real, precomputed, strict=True)]
    cost_s, cost_ci = mean_ci95(differences)  # one round: an infinite half-width, no interval
    phases = {phase["name"]: phase["iteration_s"] for phase in doc["phases"] if phase.get("iteration_s")}
    cpu = doc["breakdown"]["stalls"]["cpu"]
    print(f"{args.files_per_step} .npy files of {args.px}x{args.px} per optimizer step (FFT each), batch "
          f"{BATCH}, {args.files_per_step // BATCH} batches accumulated; {args.rounds} interleaved rounds of "
          f"{args.steps} steps; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(
        f"plain, loading precomputed   {interval_text(precomputed)}   "
        f"Stash R0 (replay)  {phases['R0']['mean'] * 1e3:8.2f} ms ± {phases['R0']['ci95'] * 1e3:.2f}"
    )
    print(
        f"plain, real loading          {interval_text(real)}   "
        f"Stash R3 (cached)  {phases['R3']['mean'] * 1e3:8.2f} ms ± {phases['R3']['ci95'] * 1e3:.2f}"
    )
    print(
        f"loading cost (real - precomputed)  {cost_s * 1e3:.2f} ms/step ± {half_text(cost_ci)}   "
        f"per round: {', '.join(f'{d * 1e3:.2f}' for d in differences)}"
    )
    cpu_ci = cpu["ci95_s"] if cpu.get("ci95_s") is not None else float("nan")
    print(
        f"Stash's CPU stall (R3 - R0)        {cpu['seconds'] * 1e3:.2f} ms/step ± {half_text(cpu_ci)} "
        f"({cpu['status']})"
    )
    ratio, half = ratio_ci95(cpu["seconds"], cpu_ci, cost_s, cost_ci)
    print(
        f"ratio Stash / plain {ratio:.3f} ± {f'{half:.3f}' if math.isfinite(half) else 'n/a'} (95%, from the "
        f"two intervals above; {(ratio - 1) * 100:+.1f}%; {verdict(ratio, half)})"
    )


if __name__ == "__main__":
    main()
