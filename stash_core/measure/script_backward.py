"""Backward passes counted until a script's first optimizer step, so that a loop which never steps a
torch.optim optimizer (weights updated by hand, p.data -= lr * p.grad) is told apart from one that hangs:
Stash counts an iteration at each optimizer step, and such a loop failed only at the start timeout, as a hang.

Once the script has stepped, its next backward call puts torch's own function back: the timed loop runs it."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Backward passes with no optimizer step before the script is told it makes none: far above any gradient
# accumulation's micro-batches per step.
BACKWARDS_WITHOUT_STEP = 1000


def count_backwards(clock) -> Callable[[], None]:
    """Count torch.autograd.backward calls (Tensor.backward goes through it) in clock.backwards_before_step
    while clock.first_step_at is None; returns the function that puts torch's own back."""
    original = torch.autograd.backward

    def counted(*args, **kwargs):
        if clock.first_step_at is None:
            clock.backwards_before_step += 1
        else:
            torch.autograd.backward = original  # stepped: the timed loop calls torch's own from now on
        return original(*args, **kwargs)

    torch.autograd.backward = counted

    def remove() -> None:
        torch.autograd.backward = original

    return remove


def no_step_message(backwards: int) -> str:
    return (
        f"the script ran {backwards:,} backward passes without a torch.optim optimizer's step(): Stash "
        "counts an iteration at each optimizer step, so a loop that updates the weights by hand "
        "(p.data -= lr * p.grad) or with an optimizer that is not a torch.optim.Optimizer cannot be "
        "profiled; step a torch.optim optimizer (torch.optim.SGD does what p.data -= lr * p.grad does)"
    )


def no_step_in_time(timeout_s: float, backwards: int) -> str:
    """The start timeout's message: a hang, or (after backward passes) weights updated without a step."""
    if not backwards:
        return (f"no optimizer step within {timeout_s:g} s of the start: the script hangs before its first "
                "step, or needs longer (--script-start-timeout)")  # fmt: skip
    return (
        f"no optimizer step within {timeout_s:g} s of the start, after {backwards:,} backward passes: the "
        "script updates its weights without a torch.optim optimizer's step(), which Stash counts iterations "
        f"by, or accumulates gradients over more than {backwards:,} passes and needs longer "
        "(--script-start-timeout)"
    )
