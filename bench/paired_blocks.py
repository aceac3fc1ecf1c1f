"""Would pairing R0 and R1 inside one launch narrow the interconnect stall's interval on a drifting machine?

The interconnect stall is t(R1) - t(R0): two workers with DDP's all-reduce against one worker alone.
Launched separately, each launch lands on whatever speed the machine has then, and on a virtual machine
that speed moves by 10-20% in level shifts of seconds (bench/launch_variance.py), so the difference of two
launches' means carries both launches' drift. Here both are timed in one launch of two gloo workers, in
alternating blocks:

- block A (R1): both ranks step the DDP-wrapped model (forward, backward with its all-reduce, optimizer);
- block B (R0): rank 0 steps the bare model alone while rank 1 sleeps in a blocking receive.

Each pair of blocks (their order alternating) gives one difference A - B, and the drift within a pair is
small. Printed: per-block means, the mean difference with its 95% interval from the pairs (paired), the same
from the A and B blocks taken as independent samples (unpaired, what separate launches give at best), and how
many pairs the paired interval needs for the target. Then one worker alone in a launch of its own, for B's
level. Stall formulas are not touched: this measures whether the pairing would help, on this machine.

    .venv/bin/python bench/paired_blocks.py [--model resnet10] [--batch-size 16] [--block 8] [--pairs 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from bench_args import bench_parser, model_name, positive_float, positive_int, shape  # noqa: E402

from stash_core.analysis.stats import mean_ci95  # noqa: E402
from stash_core.launch.multinode import free_port  # noqa: E402
from stash_core.zoo.build import build_model  # noqa: E402


def _model(args):
    torch.manual_seed(0)
    shape = tuple(int(size) for size in args.input_shape.split(","))
    model, _ = build_model(args.model, num_classes=10, input_shape=shape)
    inputs = torch.randn(args.batch_size, *shape)
    labels = torch.randint(0, 10, (args.batch_size,))
    return model, inputs, labels


def _steps(model, optimizer, inputs, labels, count: int) -> float:
    """Seconds per step over `count` steps."""
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for _ in range(count):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    return (time.perf_counter() - start) / count


def _worker(rank: int, world: int, port: int, args, results) -> None:
    torch.set_num_threads(1)  # Stash's CPU workers: one thread each on this machine's cores
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model, inputs, labels = _model(args)
    if world == 1:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        _steps(model, optimizer, inputs, labels, args.warmup)
        alone = [_steps(model, optimizer, inputs, labels, args.block) for _ in range(args.pairs)]
        results.put(("alone", alone))
        dist.destroy_process_group()
        return
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    _steps(ddp, optimizer, inputs, labels, args.warmup)
    token = torch.zeros(1)
    blocks: list[tuple[str, float]] = []
    for pair in range(args.pairs):
        for kind in "AB" if pair % 2 == 0 else "BA":
            if kind == "A":
                blocks.append(("A", _steps(ddp, optimizer, inputs, labels, args.block)))
            elif rank == 0:  # R0: the bare module, so no all-reduce hook fires
                blocks.append(("B", _steps(ddp.module, optimizer, inputs, labels, args.block)))
                dist.send(token, dst=1)
            else:
                dist.recv(token, src=0)  # sleeps in a blocking read until rank 0 is done
    if rank == 0:
        results.put(("paired", blocks))
    dist.destroy_process_group()


def _run(world: int, args) -> list:
    context = mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=_worker, args=(rank, world, port, args, results)) for rank in range(world)
    ]
    for process in processes:
        process.start()
    try:
        found = results.get(timeout=300)
    except Exception:  # a worker died: stop the others rather than leave them waiting in a collective
        for process in processes:
            process.terminate()
        raise SystemExit("a worker stopped without its result (its error is above)") from None
    for process in processes:
        process.join()
    return found[1]


def pair_count(text: str) -> int:
    """At least 3 pairs: fewer give no interval (and no correlation) to judge the pairing by."""
    pairs = positive_int(text)
    if pairs < 3:
        raise argparse.ArgumentTypeError(f"{pairs} pairs: at least 3 (an interval needs them)")
    return pairs


def pairs_needed(pairs: int, half: float, mean: float, target: float) -> float:
    """Pairs for a 95% half-width of `target` x mean, from the half-width `pairs` pairs gave (mean_ci95's,
    its count lowered for lag-1 autocorrelation): at the same correlation it shrinks as 1 / sqrt(pairs). The
    t quantile stays the one of the pairs run, so the figure errs on the high side."""
    return pairs * (half / (target * mean)) ** 2


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--model", type=model_name, default="resnet10")
    parser.add_argument("--input-shape", type=shape, default="3,32,32")
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--block", type=positive_int, default=8, help="steps per block")
    parser.add_argument("--pairs", type=pair_count, default=12, help="at least 3")
    parser.add_argument("--warmup", type=positive_int, default=5, help="steps before the timed blocks")
    parser.add_argument("--target", type=positive_float, default=0.10, help="relative half-width aimed for")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    blocks = _run(2, args)
    paired_s = time.perf_counter() - started
    a_blocks = [seconds for kind, seconds in blocks if kind == "A"]
    b_blocks = [seconds for kind, seconds in blocks if kind == "B"]
    differences = [a - b for a, b in zip(a_blocks, b_blocks, strict=True)]
    alone = _run(1, args)
    print(
        f"{args.model} {args.input_shape} batch {args.batch_size}: {args.pairs} pairs of {args.block}-step "
        f"blocks in one launch of 2 gloo workers ({paired_s:.0f} s, load {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after)"
    )
    a_mean, a_half = mean_ci95(a_blocks)
    b_mean, b_half = mean_ci95(b_blocks)
    print(
        f"  A (R1, two workers, all-reduce)  {a_mean * 1e3:7.1f} ms ± {a_half / a_mean:5.1%}  "
        f"blocks vary {statistics.stdev(a_blocks) / a_mean:.1%} (sd)"
    )
    print(
        f"  B (R0, rank 0 alone)             {b_mean * 1e3:7.1f} ms ± {b_half / b_mean:5.1%}  "
        f"blocks vary {statistics.stdev(b_blocks) / b_mean:.1%} (sd)"
    )
    alone_mean, alone_half = mean_ci95(alone)
    print(
        f"  one worker in a launch of its own {alone_mean * 1e3:6.1f} ms ± {alone_half / alone_mean:5.1%}  "
        f"(B / alone {b_mean / alone_mean:.2f})"
    )
    diff_mean, diff_half = mean_ci95(differences)
    unpaired_half = (a_half**2 + b_half**2) ** 0.5
    print(f"  interconnect A - B, paired       {diff_mean * 1e3:7.1f} ms ± {diff_half / diff_mean:5.1%}")
    print(f"  interconnect A - B, unpaired     {diff_mean * 1e3:7.1f} ms ± {unpaired_half / diff_mean:5.1%}")
    correlation = statistics.correlation(a_blocks, b_blocks) if len(a_blocks) > 2 else float("nan")
    print(f"  A and B blocks of one pair correlate {correlation:+.2f}")
    if diff_mean <= 0:
        print("  A - B is not positive here: no interconnect stall to aim a target at")
        return
    needed = pairs_needed(args.pairs, diff_half, diff_mean, args.target)  # as the interval above counts them
    block_s = needed * args.block * (a_mean + b_mean)
    print(
        f"  pairs for ± {args.target:.0%} on the interconnect stall: about {needed:.0f} "
        f"({block_s:.0f} s of blocks)"
    )


if __name__ == "__main__":
    main()
