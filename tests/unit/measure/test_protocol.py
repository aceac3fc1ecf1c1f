import io
import math
import multiprocessing
import os
import signal

import pytest

from stash_core.measure import protocol


def test_round_trip_with_a_launcher_prefix_and_non_finite_numbers():
    stream = io.StringIO()
    protocol.emit("PROGRESS", {"mean_s": 0.5, "ci": math.inf, "xs": [math.nan, 1.0]}, stream)
    line = "[rank0]: " + stream.getvalue().strip()
    kind, payload = protocol.parse(line)
    assert kind == "PROGRESS"
    assert payload == {"mean_s": 0.5, "ci": None, "xs": [None, 1.0]}


def test_ordinary_and_malformed_lines_are_ignored():
    assert protocol.parse("epoch 3 done") is None
    assert protocol.parse("STASH-RESULT {not json") is None
    assert protocol.parse("STASH-UNKNOWN {}") is None


def _report_start(queue) -> None:
    protocol.start_worker(protocol.WORKER_NAME)
    with open("/proc/self/comm") as comm:
        name = comm.read().strip()
    queue.put((name, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL))


def test_a_forked_worker_is_named_and_gets_a_new_interpreters_signal_handling() -> None:
    """Forked as torchrun forks a worker: the parent's SIGTERM handler (torchrun's raises) is not kept."""
    if not os.path.exists("/proc/self/comm"):
        pytest.skip("no /proc here")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    before = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        child = context.Process(target=_report_start, args=(queue,))
        child.start()
        child.join(30)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (protocol.WORKER_NAME, True)
