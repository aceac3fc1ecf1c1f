"""Backward passes before a script's first optimizer step (measure/script_backward.py): counted through
torch.autograd.backward, which Tensor.backward calls, until the first step; torch's own put back after."""

from __future__ import annotations

import torch

from stash_core.measure.script_backward import count_backwards, no_step_in_time, no_step_message


class Clock:
    first_step_at, backwards_before_step = None, 0


def test_backward_passes_are_counted_until_the_first_step_and_torch_is_put_back() -> None:
    original = torch.autograd.backward
    clock = Clock()
    remove = count_backwards(clock)
    try:
        weight = torch.ones(3, requires_grad=True)
        for _ in range(3):
            (weight * 2).sum().backward()
        torch.autograd.backward((weight * 3).sum())
        assert clock.backwards_before_step == 4 and weight.grad.tolist() == [9.0, 9.0, 9.0]
        clock.first_step_at = 1.0
        (weight * 2).sum().backward()
        assert clock.backwards_before_step == 4  # not counted once the script steps
        assert torch.autograd.backward is original  # the timed loop calls torch's own
    finally:
        remove()
    assert torch.autograd.backward is original


def test_the_messages_say_what_the_script_does_not_do() -> None:
    assert "1,000 backward passes without a torch.optim optimizer's step()" in no_step_message(1000)
    assert "the script hangs before its first step" in no_step_in_time(120, 0)
    slow = no_step_in_time(120, 7)
    assert "after 7 backward passes" in slow and "hangs" not in slow and "--script-start-timeout" in slow
