"""Stamps at the boundaries of a training step, turned into durations in one go.

On CPU a stamp is the host clock. On CUDA the host only queues kernels and runs ahead of the device, so a
stamp is a CUDA event recorded on the stream the step's work goes to, and durations are read when the stamps
are settled: one synchronisation per check interval instead of one per boundary. The host keeps running ahead
as in a real job, and the durations are those of the device's timeline (a data wait the device did not notice,
because it was still busy with the previous step, is not counted).

Used by Stash's own timed loop (timed_loop.py) and by the instrumentation of a user's script
(script_hooks.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


class HostClock:
    """Stamps from the host clock: nothing to wait for."""

    events = False

    def __init__(self) -> None:
        self.stamp: Callable[[], float] = time.perf_counter  # bound once: one call per boundary

    def settle(self, last) -> None:
        """Nothing is queued on a CPU."""

    @staticmethod
    def seconds(first: float, second: float) -> float:
        return second - first


class EventClock:
    """Stamps as CUDA events on a device's current stream. `new_event` and `stream` can be replaced (a test
    on a machine with no GPU passes objects with record(stream), synchronize() and elapsed_time(other))."""

    events = True

    def __init__(
        self,
        device: torch.device | None = None,
        new_event: Callable[[], object] | None = None,
        stream: Callable[[], object] | None = None,
    ) -> None:
        self.device = device
        self.new_event = new_event or (lambda: torch.cuda.Event(enable_timing=True))
        self.stream = stream or (lambda: torch.cuda.current_stream(self.device))
        self.synchronisations = 0

    def stamp(self):
        event = self.new_event()
        event.record(self.stream())
        return event

    def settle(self, last) -> None:
        """Wait until the device has passed the last stamp, so every earlier event has its time."""
        if last is not None:
            last.synchronize()
            self.synchronisations += 1

    @staticmethod
    def seconds(first, second) -> float:
        return first.elapsed_time(second) / 1e3  # milliseconds between the two events


def clock_for(device: torch.device) -> HostClock | EventClock:
    """Events on a CUDA device, the host clock elsewhere."""
    return EventClock(device) if device.type == "cuda" else HostClock()
