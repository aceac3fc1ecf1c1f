"""The CUDA-event path of the timed loop and of a script's step clock, on a machine with no GPU: fake events
on a fake device timeline stand in for CUDA events. Durations must come from the events (not the host clock),
read only after one synchronisation per check interval."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from stash_core.measure.device_clock import EventClock, HostClock, clock_for
from stash_core.measure.script_hooks import StepClock, install
from stash_core.measure.timed_loop import StepTimes, run_steps

TICK_MS = 1.5  # the fake device advances this much between two recorded events


class FakeDevice:
    def __init__(self) -> None:
        self.now_ms = 0.0
        self.synchronised_to_ms = -1.0
        self.synchronisations = 0
        self.streams: list = []


class FakeEvent:
    def __init__(self, device: FakeDevice) -> None:
        self.device, self.at_ms = device, None

    def record(self, stream) -> None:
        self.device.streams.append(stream)
        self.device.now_ms += TICK_MS
        self.at_ms = self.device.now_ms

    def synchronize(self) -> None:
        self.device.synchronisations += 1
        self.device.synchronised_to_ms = self.at_ms

    def elapsed_time(self, other: FakeEvent) -> float:
        # As CUDA: an event's time can be read only once the device has passed it.
        assert other.at_ms <= self.device.synchronised_to_ms, "read before a synchronisation"
        return other.at_ms - self.at_ms


def fake_clock(device: FakeDevice) -> EventClock:
    return EventClock(torch.device("cuda", 0), new_event=lambda: FakeEvent(device), stream=lambda: "stream")


def test_the_timed_loop_reads_events_after_one_synchronisation_per_call() -> None:
    device = FakeDevice()
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = itertools.repeat((torch.ones(3, 4), torch.tensor([0, 1, 0])))
    times = StepTimes()
    cpu = torch.device("cpu")
    for count in (3, 5):
        run_steps(
            model,
            optimizer,
            torch.nn.functional.cross_entropy,
            batches,
            cpu,
            count,
            times,
            fake_clock(device),
        )
    assert device.synchronisations == 2 and len(times) == 8
    tick_s = TICK_MS / 1e3
    for part in ("data_s", "forward_s", "backward_s", "optimizer_s"):
        assert getattr(times, part) == pytest.approx(
            [tick_s] * 8
        )  # the device's timeline, not the host clock
    assert times.iteration_s == pytest.approx([4 * tick_s] * 8)
    assert set(device.streams) == {"stream"}


def test_a_scripts_clock_uses_events_on_the_device_of_the_optimizers_parameters() -> None:
    device = FakeDevice()
    clock = StepClock(event_clock=lambda where: fake_clock(device))
    on_gpu = SimpleNamespace(param_groups=[{"params": [SimpleNamespace(device=torch.device("cuda", 1))]}])
    clock.step_started(on_gpu)
    clock.boundary(on_gpu)  # the first step chooses the clock: events from here on
    for _ in range(4):
        with_data = (clock.stamp(), clock.stamp())
        clock.data_pairs.append(with_data)
        clock.forward_pairs.append((clock.stamp(), clock.stamp()))
        clock.step_started(on_gpu)
        clock.boundary(on_gpu)
    assert clock.iterations == 4 and clock.iteration_s == [] and device.synchronisations == 0
    clock.settle()
    assert device.synchronisations == 1
    tick_s = TICK_MS / 1e3
    assert clock.iteration_s == pytest.approx([6 * tick_s] * 4)
    for part in ("data_s", "forward_s", "optimizer_s"):
        assert clock.parts[part] == pytest.approx([tick_s] * 4)
    assert clock.parts["backward_s"] == pytest.approx([3 * tick_s] * 4)  # the gaps between the parts
    clock.settle()
    assert device.synchronisations == 1  # nothing new: no wait


def test_parameters_on_the_cpu_keep_the_host_clock_and_make_no_event() -> None:
    made: list = []
    clock = StepClock(event_clock=lambda where: made.append(where))
    remove = install(clock, replay=False)
    try:
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(1, 2)).sum().backward()
            optimizer.step()
    finally:
        remove()
    assert made == [] and isinstance(clock.device_clock, HostClock)
    assert isinstance(clock_for(torch.device("cpu")), HostClock)
    assert isinstance(clock_for(torch.device("cuda", 0)), EventClock)  # made without touching a GPU
