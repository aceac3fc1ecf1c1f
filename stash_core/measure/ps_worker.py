"""One process of an asynchronous parameter-server training (spotDNN's setting), started by launch/ps.py.

    torchrun --nproc-per-node N+1 -m stash_core.measure.ps_worker --model M --batch B --duration-s S \
        --counts 1,2,4,7

Rank 0 is the parameter server (PS); ranks 1..N are workers. One training per worker count n in --counts
(N = the largest), one after the other in the same processes: ranks 1..n train, the others wait. Over
torch.distributed (gloo), each worker at its own pace computes a gradient on its own synthetic batch, pushes
it to the PS (one flat tensor: the model's gradients plus one control value) and pulls the updated
parameters back. The PS receives from any source, so it serves workers in the order their pushes arrive: it
applies each gradient (SGD) and sends the parameters to that worker only. A worker past its duration pushes
a stop message instead.

Per count, rank 0 prints one protocol RESULT line per rank in the count (gathered to rank 0, so that lines
never interleave): a worker's per-exchange compute time, push start (wall clock), exchange time (push +
pull, queueing at the PS included) and the loss with the PS's update count at the pull; the PS's services
(worker, when its receive was posted, received, reply sent).
spot/workload_profile.py turns them into bandwidths and the share of pushes that met a busy PS. It compares
the PS's and the workers' wall clocks, so their machines must share one clock: this machine, or the nodes
of an emulated cluster (launch/ps.py starts one process per node there, rank i on node i).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from stash_core.measure.protocol import PS_NAME, emit, end_reported, start_worker

STOP = 1.0  # control value of a worker's last message
MAX_RECORDS = 20_000  # per rank: the RESULT line stays a few hundred kB


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ps_worker")
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--duration-s", type=float, required=True)
    parser.add_argument("--counts", type=lambda t: [int(v) for v in t.split(",")], required=True)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--num-classes", type=int, default=None)
    parser.add_argument("--input-shape", default=None)
    # The clock of the times the PS and the workers compare (ps_exchanges.py): the monotonic one where they
    # share a machine (a wall clock stepped by NTP meanwhile made an exchange last -0.98 s), the wall clock,
    # kept in step between machines, where they do not.
    parser.add_argument("--clock", choices=("monotonic", "wall"), default="monotonic")
    return parser.parse_args(argv)


_CLOCKS = {"monotonic": time.monotonic, "wall": time.time}


def _flat_params(model):
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _load_params(model, flat) -> None:
    offset = 0
    for p in model.parameters():
        size = p.numel()
        p.data.copy_(flat[offset : offset + size].view_as(p))
        offset += size


def serve(model, workers: int, lr: float, clock=time.monotonic) -> dict:
    """The PS: serve pushes in arrival order until every worker has sent its stop message."""
    import torch
    import torch.distributed as dist

    params = _flat_params(model)
    size = params.numel()
    incoming = torch.empty(size + 1)
    reply = torch.empty(size + 1)
    updates, stopped, services = 0, 0, []
    while stopped < workers:
        posted = clock()
        src = dist.recv(incoming)  # any source: whoever pushed first is served first
        received = clock()
        if incoming[size].item() == STOP:
            stopped += 1
            continue
        params.add_(incoming[:size], alpha=-lr)
        updates += 1
        reply[:size] = params
        reply[size] = float(updates)
        dist.send(reply, dst=src)
        if len(services) < MAX_RECORDS:
            services.append([src, posted, received, clock()])
    return {"role": "ps", "param_count": size, "updates": updates, "services": services}


def train(model, info, rank: int, batch: int, duration_s: float, clock=time.monotonic) -> dict:
    """A worker: compute a gradient, push it, pull the parameters; until its duration is over."""
    import torch
    import torch.distributed as dist

    from stash_core.zoo.batches import loss_fn, synthetic_batch

    criterion = loss_fn(info)
    inputs, targets = synthetic_batch(info, batch, "cpu", seed=rank)
    size = sum(p.numel() for p in model.parameters())
    outgoing = torch.zeros(size + 1)
    incoming = torch.empty(size + 1)
    records = []  # compute_s, push_start, exchange_s, loss, updates in the parameters the loss was taken on
    updates_seen = 0.0  # the server's update count in this worker's parameters: none before the first pull
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        started = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = criterion(model(inputs), targets)
        loss.backward()
        torch.cat([p.grad.reshape(-1) for p in model.parameters()], out=outgoing[:size])
        computed = time.perf_counter()
        push_start = clock()
        dist.send(outgoing, dst=0)
        dist.recv(incoming, src=0)
        exchange_s = time.perf_counter() - computed
        _load_params(model, incoming[:size])
        if len(records) < MAX_RECORDS:
            records.append([computed - started, push_start, exchange_s, loss.item(), updates_seen])
        updates_seen = incoming[size].item()  # the next step's loss is taken on the parameters just pulled
    outgoing[size] = STOP
    dist.send(outgoing, dst=0)
    return {"role": "worker", "rank": rank, "batch": batch, "records": records}


def _emit_from_rank0(result: dict | None, rank: int, world_size: int) -> None:
    """Rank 0 prints every rank's RESULT line: lines of hundreds of kB written by several processes into
    one pipe at the same moment interleave, and a cut line is a lost result."""
    import torch.distributed as dist

    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(result, gathered, dst=0)
    for payload in gathered or []:
        if payload is not None:
            emit("RESULT", payload)


def main(argv: list[str] | None = None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except Exception as error:  # the launcher reports this line instead of torchrun's traceback summary
        emit("ERROR", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        raise


def _run(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from stash_core.spec_parse import parse_input_shape
    from stash_core.zoo.build import build_model

    torch.set_num_threads(1)  # one core per process: the processes of a run share the machine
    torch.manual_seed(0)  # every rank starts from the same parameters
    shape = parse_input_shape(args.input_shape) if args.input_shape else None
    model, info = build_model(args.model, args.num_classes, shape)
    model.train()
    initial = _flat_params(model).clone()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        for workers in args.counts:
            _load_params(model, initial)  # each count trains from the same start (comparable loss curves)
            dist.barrier()  # the count's duration starts once the previous count is over everywhere
            result = None  # a rank outside this count contributes nothing
            if rank == 0:
                result = serve(model, workers, args.lr, _CLOCKS[args.clock])
            elif rank <= workers:
                result = train(model, info, rank, args.batch, args.duration_s, _CLOCKS[args.clock])
            if result is not None:
                result = {**result, "workers": workers, "pid": os.getpid()}
            _emit_from_rank0(result, rank, dist.get_world_size())
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    start_worker(PS_NAME)
    end_reported(main())
