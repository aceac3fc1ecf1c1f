"""A profiled script's process groups, never destructed: the script's dist.destroy_process_group() and
Stash's own keep the group referenced until the process ends, which it does without the interpreter's
teardown, once the script's exit handlers have run (end).

Torch's gloo group joins its threads in its destructor while holding the GIL, and one of them, freeing its
last work, may wait for the GIL: a script that destroyed its group and then let its DDP model go (the usual
end of a DDP script: the model's reducer held the group's last reference) hung there every few runs, or
aborted at the interpreter's exit ("terminate called without an active exception")."""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator
from typing import NoReturn

import torch.distributed as dist

from stash_core.measure import protocol

KEPT_GROUPS: list = []  # every group destroyed in this process, referenced until it ends
REAL_DESTROY = dist.destroy_process_group
_CLOCK: list = []  # the script's step clock, where its end of the default group is recorded


def destroy_kept(group=None) -> None:
    """dist.destroy_process_group(group), the group kept referenced (KEPT_GROUPS); the script's end of its
    default group is recorded on its clock (group_ended_after: optimizer steps by then), once."""
    if (group is None or group is dist.group.WORLD) and _CLOCK and _CLOCK[0].group_ended_after is None:
        clock = _CLOCK[0]
        clock.group_ended_after = clock.iterations + (clock.first_step_at is not None)
    KEPT_GROUPS.append(group if group is not None else dist.group.WORLD)
    REAL_DESTROY(group)


@contextlib.contextmanager
def groups_kept(clock=None) -> Iterator[None]:
    """While the script runs, its dist.destroy_process_group() is destroy_kept (recording on `clock`)."""
    dist.destroy_process_group = destroy_kept
    _CLOCK[:] = [clock] if clock is not None else []
    try:
        yield
    finally:
        dist.destroy_process_group = REAL_DESTROY
        _CLOCK.clear()


def end(status: int) -> NoReturn:
    """The process's end once its run is reported: the script's exit handlers run, as at an ordinary exit,
    then the process exits without the interpreter's teardown, so no kept group is destructed."""
    atexit._run_exitfuncs()
    protocol.end_reported(status)
