"""What does Stash's timed loop add to the loop it times?

The same model and the same on-device batch go through a plain training loop and through
stash_core.measure.timed_loop.run_steps, in interleaved blocks (so drift in machine load hits both
alike). Prints the wall time per iteration of each and the slowdown ratio with its 95% interval
over block pairs.

    python bench/overhead.py [--model resnet18] [--input-shape 3,64,64] [--batch-size 16] [--pairs 20]
"""

from __future__ import annotations

import itertools

import torch
from bench_args import bench_parser, model_name, positive_int, shape
from interleaved import interleaved_blocks, print_comparison

from stash_core.measure.timed_loop import StepTimes, make_sync, run_steps
from stash_core.zoo import build_model, loss_fn, parse_input_shape, synthetic_batch


def plain_loop(model, optimizer, loss, batches, count: int) -> None:
    for _ in range(count):
        inputs, targets = next(batches)
        loss(model(inputs), targets).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--model", type=model_name, default="resnet18")
    parser.add_argument("--input-shape", type=shape, default="3,64,64")
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--block", type=positive_int, default=10, help="iterations per block")
    parser.add_argument("--pairs", type=positive_int, default=20, help="interleaved plain/timed block pairs")
    parser.add_argument("--threads", type=positive_int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    model, info = build_model(args.model, num_classes=10, input_shape=parse_input_shape(args.input_shape))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss = loss_fn(info)
    batches = itertools.repeat(synthetic_batch(info, args.batch_size, device))
    sync = make_sync(device)
    plain_loop(model, optimizer, loss, batches, args.block)  # warm-up
    plain_s, timed_s, ratios = interleaved_blocks(
        lambda: plain_loop(model, optimizer, loss, batches, args.block),
        lambda: run_steps(model, optimizer, loss, batches, device, args.block, StepTimes(), sync),
        args.block, args.pairs,
    )  # fmt: skip
    print(
        f"model {args.model} {args.input_shape} batch {args.batch_size}, "
        f"{args.pairs} x 2 blocks of {args.block}"
    )
    print_comparison("plain loop", "stash timed", plain_s, timed_s, ratios)


if __name__ == "__main__":
    main()
