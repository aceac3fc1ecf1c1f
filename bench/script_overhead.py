"""What does Stash's instrumentation of a user's script add to the script's own training loop?

The same training loop (a DataLoader of dict batches with a collate step, AdamW, clip_grad_norm_, an MLP of
--layers hidden layers) runs in interleaved blocks: plain, and with Stash's hooks installed (optimizer step
hooks, timed DataLoader iterator, the forward timer's module hooks, the stopping rule's checks;
script_hooks.py, script_forward.py and script_stop.py), so drift in machine load hits both alike. Prints the
time per iteration of each, the slowdown ratio with its 95% interval over block pairs (goal: under 1%), and
the time added per iteration.

    python bench/script_overhead.py [--width 512] [--layers 1] [--batch-size 32] [--block 50] [--pairs 20]
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from stash_core.analysis.stats import mean_ci95
from stash_core.measure.script_hooks import StepClock, install
from stash_core.measure.script_stop import StopRule


def make_loop(width: int, layers: int, batch_size: int):
    data = TensorDataset(torch.randn(batch_size * 64, width), torch.randint(0, 10, (batch_size * 64,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=True,
                        collate_fn=lambda rows: {"x": torch.stack([r[0] for r in rows]),
                                                 "y": torch.stack([r[1] for r in rows])})  # fmt: skip
    hidden = [module for _ in range(layers) for module in (torch.nn.Linear(width, width), torch.nn.ReLU())]
    model = torch.nn.Sequential(*hidden, torch.nn.Linear(width, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = itertools.chain.from_iterable(itertools.repeat(loader))  # epochs, as a script's loop has them

    def steps(count: int) -> None:
        for batch in itertools.islice(batches, count):
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()

    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=1, help="hidden layers (more modules per forward)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block", type=int, default=50, help="iterations per block")
    parser.add_argument("--pairs", type=int, default=20, help="interleaved plain/instrumented block pairs")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = make_loop(args.width, args.layers, args.batch_size)
    # The stopping rule with a target it never reaches, so its checks run throughout as in a real run.
    job = {"phase": "bench", "iterations": None, "target_relative_ci": 1e-12, "max_iterations": 10**9,
           "max_phase_s": 1e9}  # fmt: skip
    clock = StepClock()
    clock.on_boundary = StopRule(job, clock, rank=1)  # not rank 0: no progress lines
    steps(args.block)  # warm-up
    ratios, plain_s, timed_s = [], [], []
    for pair in range(args.pairs):
        order = ("plain", "timed") if pair % 2 == 0 else ("timed", "plain")
        block_s = {}
        for kind in order:
            remove = install(clock, replay=False) if kind == "timed" else None
            start = time.perf_counter()
            steps(args.block)
            block_s[kind] = (time.perf_counter() - start) / args.block
            if remove is not None:
                remove()
        plain_s.append(block_s["plain"])
        timed_s.append(block_s["timed"])
        ratios.append(block_s["timed"] / block_s["plain"])
    ratio, ratio_ci = mean_ci95(ratios)
    plain_mean, plain_ci = mean_ci95(plain_s)
    timed_mean, timed_ci = mean_ci95(timed_s)
    print(
        f"MLP width {args.width}, {args.layers} hidden layers, batch {args.batch_size}, "
        f"{args.pairs} x 2 blocks of {args.block} iterations"
    )
    print(f"plain loop       {plain_mean * 1e3:8.3f} ms/iteration ± {plain_ci * 1e3:.3f}")
    print(f"instrumented     {timed_mean * 1e3:8.3f} ms/iteration ± {timed_ci * 1e3:.3f}")
    print(f"slowdown ratio   {ratio:.4f} ± {ratio_ci:.4f}  ({(ratio - 1) * 100:+.2f}%)")
    added_s, added_ci = mean_ci95([timed - plain for timed, plain in zip(timed_s, plain_s, strict=True)])
    print(f"added            {added_s * 1e6:8.1f} us/iteration ± {added_ci * 1e6:.1f}")
    best_plain_s, best_timed_s = min(plain_s), min(timed_s)  # the blocks least disturbed by other processes
    print(
        f"fastest blocks   {best_plain_s * 1e3:.3f} vs {best_timed_s * 1e3:.3f} ms/iteration "
        f"({(best_timed_s / best_plain_s - 1) * 100:+.2f}%, {(best_timed_s - best_plain_s) * 1e6:+.1f} us)"
    )
    median = sorted(ratios)[len(ratios) // 2]  # robust to a block another process slowed down
    print(f"median ratio     {median:.4f}  ({(median - 1) * 100:+.2f}%)")
    rule = clock.on_boundary
    print(
        f"iterations timed {clock.iterations}, of which all-reduced by the rule's checks {rule.checked}; "
        f"forward split: {clock.forward_seen}"
    )


if __name__ == "__main__":
    main()
