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

import itertools

import torch
from bench_args import bench_parser, positive_int
from interleaved import interleaved_blocks, print_comparison
from torch.utils.data import DataLoader, TensorDataset

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
    parser = bench_parser(__doc__)
    parser.add_argument("--width", type=positive_int, default=512)
    parser.add_argument(
        "--layers", type=positive_int, default=1, help="hidden layers (more modules per forward)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--block", type=positive_int, default=50, help="iterations per block")
    parser.add_argument(
        "--pairs", type=positive_int, default=20, help="interleaved plain/instrumented block pairs"
    )
    parser.add_argument("--threads", type=positive_int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = make_loop(args.width, args.layers, args.batch_size)
    # The stopping rule with a target it never reaches, so its checks run throughout as in a real run.
    job = {"phase": "bench", "iterations": None, "target_relative_ci": 1e-12, "max_iterations": 10**9,
           "max_phase_s": 1e9}  # fmt: skip
    clock = StepClock()
    clock.on_boundary = StopRule(job, clock, rank=1)  # not rank 0: no progress lines
    steps(args.block)  # warm-up

    def instrumented() -> None:
        remove = install(clock, replay=False)
        steps(args.block)
        remove()

    plain_s, timed_s, ratios = interleaved_blocks(lambda: steps(args.block), instrumented, args.block,
                                                  args.pairs)  # fmt: skip
    print(
        f"MLP width {args.width}, {args.layers} hidden layers, batch {args.batch_size}, "
        f"{args.pairs} x 2 blocks of {args.block} iterations"
    )
    print_comparison("plain loop", "instrumented", plain_s, timed_s, ratios)
    rule = clock.on_boundary
    print(
        f"iterations timed {clock.iterations}, of which all-reduced by the rule's checks {rule.checked}; "
        f"forward split: {clock.forward_seen}"
    )


if __name__ == "__main__":
    main()
