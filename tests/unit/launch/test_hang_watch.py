"""The hang watch counts the loop's limit and grace in the seconds the workers could run: a quiet loop on a
free machine is stopped soon after its limit, one on a machine too busy to run it is not, and nothing is
counted before the first progress line or after the loop's end."""

from __future__ import annotations

import os
import threading

import pytest

from stash_core.launch.hang_watch import HangWatch, grace_s, run_delays_ns


class Machine:
    """A fake clock and the threads' run delays: `tick(wall_s, waited_s)` moves both."""

    def __init__(self) -> None:
        self.now_s, self.delay_ns = 0.0, 0

    def tick(self, wall_s: float, waited_s: float = 0.0) -> None:
        self.now_s += wall_s
        self.delay_ns += int(waited_s * 1e9)

    def clock(self) -> float:
        return self.now_s

    def read(self, _root_pid: int) -> dict[int, int] | None:
        return {101: self.delay_ns, 102: 0}


def run(watch: HangWatch, machine: Machine, seconds: int, waited_share: float = 0.0) -> str | None:
    reason = None
    for _ in range(seconds):
        machine.tick(1.0, waited_share)
        reason = reason or watch.check(1)
    return reason


def test_a_quiet_loop_on_a_free_machine_is_stopped_after_its_limit_and_grace():
    machine = Machine()
    watch = HangWatch(4.0, read_delays=machine.read, clock=machine.clock)
    assert run(watch, machine, 60) is None  # not armed: start-up has its own allowance
    watch.loop_started()
    budget_s = 4.0 + grace_s(4.0)
    assert run(watch, machine, int(budget_s)) is None
    reason = run(watch, machine, 3)
    assert reason is not None and "a rank is hung" in reason and "limit of 4 s" in reason


def test_a_machine_too_busy_to_run_the_workers_stops_the_clock():
    machine = Machine()
    watch = HangWatch(4.0, read_delays=machine.read, clock=machine.clock)
    watch.loop_started()
    assert run(watch, machine, 600, waited_share=1.0) is None  # starved the whole time: no time counted
    assert run(watch, machine, 24, waited_share=0.5) is None  # half starved: 12 s counted of its 15 ...
    assert watch.runnable_s == pytest.approx(12.0, abs=1.0)
    assert run(watch, machine, 5) is not None  # ... and past them once the machine frees up


def test_the_loop_s_end_disarms_it_for_good():
    machine = Machine()
    watch = HangWatch(4.0, read_delays=machine.read, clock=machine.clock)
    watch.loop_started()
    watch.loop_ended()
    watch.loop_started()  # a late progress line does not re-arm it: the probe has its own allowance
    assert run(watch, machine, 600) is None


def test_without_run_delays_the_clock_does_not_run():
    machine = Machine()
    watch = HangWatch(4.0, read_delays=lambda _pid: None, clock=machine.clock)
    watch.loop_started()
    assert run(watch, machine, 600) is None and watch.runnable_s == 0.0


def test_run_delays_are_read_for_every_thread_of_a_process():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        delays = run_delays_ns(os.getpid())
    finally:
        stop.set()
        thread.join()
    if delays is None:
        pytest.skip("this kernel keeps no scheduler statistics (/proc/PID/task/TID/schedstat)")
    assert thread.native_id in delays and threading.main_thread().native_id in delays
    assert all(value >= 0 for value in delays.values())
    assert run_delays_ns(2**22 + 12345) is None  # no such process
