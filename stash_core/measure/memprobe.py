"""Child process of the memory profile (memory.py): peak memory of training steps of a model at one batch.

    python -m stash_core.measure.memprobe MODEL BATCH DEVICE [NUM_CLASSES INPUT_SHAPE [RESULT_FILE]]

writes one JSON object {"peak_bytes": ...} to RESULT_FILE (printed when there is none). The result has a
file of its own because the model's code runs in this process and may print to stdout, at any time.
On a GPU: torch.cuda.max_memory_allocated over two steps (forward, backward, SGD with momentum, so the
momentum buffers exist). On the CPU: the process's peak resident set (ru_maxrss) less what it held before
the model was built (the interpreter and torch), the closest a CPU gets to the memory a training step
allocates. One process per batch size, so the peaks of batches do not mix.
"""

from __future__ import annotations

import json
import resource
import sys


def _rss_bytes() -> int:
    import os

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss() -> None:
    """Reset the process's resident high-water mark (Linux: 5 > /proc/self/clear_refs); best effort."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int:
    """The resident high-water mark since the last reset (VmHWM), else the process's lifetime peak."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def peak_step_bytes(model_name: str, batch: int, device: str, num_classes: int | None,
                    input_shape: tuple[int, ...] | None) -> int:  # fmt: skip
    import torch

    from stash_core.zoo.batches import loss_fn, synthetic_batch
    from stash_core.zoo.build import build_model
    from stash_core.zoo.compiler_guards import compiler_unimported

    torch.manual_seed(0)
    torch.set_num_threads(1)
    on_gpu = device.startswith("cuda")
    before = 0 if on_gpu else _rss_bytes()
    if not on_gpu:
        _reset_peak_rss()  # the peak of importing torch must not count as the step's
    model, info = build_model(model_name, num_classes, input_shape)
    model = model.to(device).train()
    # On the CPU the optimizer's import of torch's compiler would count as the step's memory (and cost 2 s of
    # CPU): a stand-in serves it (zoo/compiler_guards.py). A model whose factory loaded it keeps the real one.
    with compiler_unimported(when=not on_gpu):
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        criterion = loss_fn(info)
        inputs, targets = synthetic_batch(info, batch, device)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats(device)
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            criterion(model(inputs), targets).backward()
            optimizer.step()
    if on_gpu:
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    peak = _peak_rss_bytes()
    return max(int(peak - before), 0)


def main(argv: list[str]) -> int:
    model_name, batch, device = argv[0], int(argv[1]), argv[2]
    num_classes = int(argv[3]) if len(argv) > 3 and argv[3] != "-" else None
    shape = tuple(int(v) for v in argv[4].split(",")) if len(argv) > 4 and argv[4] != "-" else None
    reply = json.dumps({"peak_bytes": peak_step_bytes(model_name, batch, device, num_classes, shape)})
    if len(argv) > 5:
        with open(argv[5], "w") as handle:
            handle.write(reply)
    else:
        print(reply)
    return 0


if __name__ == "__main__":
    from stash_core.errors import UsageError

    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as error:  # one line for the parent to pass on
        print(error, file=sys.stderr)
        sys.exit(2)
