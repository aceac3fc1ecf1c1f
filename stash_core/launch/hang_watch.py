"""Stop a local launch whose timed loop went quiet: a rank that hangs (a deadlock, a stuck data loader, a
collective waiting for a peer that never comes) would otherwise hold the launch until its start-up allowance
runs out, minutes after the loop's own limit.

The loop's limit and a grace are counted from the first progress line, in the seconds the launch's
processes could have run: wall time less the longest time any of their threads waited for a core (the
scheduler's run delay, /proc/PID/task/TID/schedstat). A machine too busy to run the workers (a test tier at
idle priority, other jobs) stops this clock instead of being taken for a hang; a hung rank, which sleeps,
does not. Where the run delay cannot be read the clock does not run, and the start-up allowance stays the
only limit.

Before the launch is stopped its ranks dump their Python stacks (hung_error, measure/stacks.py), which say
which rank was where; their collectives are given the launch's whole time (engine/phase.py), so that a peer
waiting for the hung rank does not time out first and be taken for the cause.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

import psutil

from stash_core.errors import MeasurementError
from stash_core.measure.stacks import dump_stacks, stack_tail, where_ranks_were

CHECK_EVERY_S = 1.0
GRACE_S = 10.0  # summarising, and the last chunk of iterations after the loop's own limit ...
GRACE_SHARE = 0.25  # ... which is at most a fifth of the loop's time so far: a quarter of the limit


def grace_s(loop_s: float) -> float:
    """How long past its limit the timed loop may go quiet before the launch is stopped, seconds."""
    return GRACE_S + GRACE_SHARE * loop_s


class HangWatch:
    """Armed by the loop's first progress line, disarmed by its end; `check` says why to stop, or None."""

    def __init__(self, loop_s: float, read_delays: Callable[[int], dict[int, int] | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.loop_s = loop_s
        self.budget_s = loop_s + grace_s(loop_s)
        self.armed = False
        self.ended = False
        self.runnable_s = 0.0  # seconds the processes could have run since the first progress line
        self._read = read_delays or run_delays_ns
        self._clock = clock
        self._last: tuple[float, dict[int, int]] | None = None
        self._checked_at = -CHECK_EVERY_S

    def loop_started(self) -> None:
        if not self.ended:
            self.armed = True

    def loop_ended(self) -> None:
        self.armed, self.ended = False, True

    def check(self, root_pid: int) -> str | None:
        """Why to stop the launch rooted at `root_pid`, once its loop has been quiet past the budget."""
        now = self._clock()
        if not self.armed or now - self._checked_at < CHECK_EVERY_S:
            return None
        self._checked_at = now
        delays = self._read(root_pid)
        if delays is None:  # nothing readable: the clock does not run
            self._last = None
            return None
        if self._last is not None:
            last_at, last = self._last
            waited_ns = max((delays[tid] - last[tid] for tid in delays.keys() & last.keys()), default=0)
            self.runnable_s += max(0.0, (now - last_at) - waited_ns / 1e9)
        self._last = (now, delays)
        if self.runnable_s <= self.budget_s:
            return None
        return (
            f"a rank is hung: the timed loop went quiet and had not ended {self.budget_s:.0f} s after it "
            f"began (its limit of {self.loop_s:g} s and a grace of {grace_s(self.loop_s):.0f} s, counted "
            "while the workers could run); stopped it"
        )


def hung_error(reason: str, root_pid: int, folder: str) -> MeasurementError:
    """The error a hung launch is stopped with: `reason`, where each rank was (measure/stacks.py: their
    stacks, dumped now by the workers that can), and those stacks as its `stderr_tail`."""
    try:
        pids = {child.pid for child in psutil.Process(root_pid).children(recursive=True)}
    except psutil.Error:
        pids = set()
    stacks = dump_stacks(folder, pids) if pids else {}
    where = where_ranks_were(stacks)
    said = f"{reason}; {where} (their stacks: phases[].stderr_tail of the result file)" if where else reason
    error = MeasurementError(said)
    error.stderr_tail = stack_tail(stacks)
    return error


def run_delays_ns(root_pid: int) -> dict[int, int] | None:
    """Each thread's run delay (ns spent waiting for a core) of `root_pid` and its descendants; None when
    none can be read (a kernel without scheduler statistics, or every process gone)."""
    try:
        root = psutil.Process(root_pid)
        pids = [root_pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return None
    delays: dict[int, int] = {}
    for pid in pids:
        for tid in _threads(pid):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as stat:
                    delays[tid] = int(stat.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return delays or None


def _threads(pid: int) -> Iterable[int]:
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []
