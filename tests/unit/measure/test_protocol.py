import io
import math
import multiprocessing
import os
import signal

import pytest

from stash_core.measure import protocol


def test_round_trip_with_a_launcher_prefix_and_non_finite_numbers():
    stream = io.StringIO()
    protocol.emit("RESULT", {"mean_s": 0.5, "ci": math.inf, "xs": [math.nan, 1.0]}, stream)
    line = "[rank0]: " + stream.getvalue().strip()
    kind, payload = protocol.parse(line)
    assert kind == "RESULT"
    assert payload == {"mean_s": 0.5, "ci": None, "xs": [None, 1.0]}


def test_ordinary_and_malformed_lines_are_ignored():
    assert protocol.parse("epoch 3 done") is None
    assert protocol.parse("STASH-RESULT {not json") is None
    assert protocol.parse("STASH-UNKNOWN {}") is None


PROGRESS = {"phase": "R0", "iterations": 12, "kept": 7, "mean_s": 0.1, "relative_ci": 0.2,
            "target_relative_ci": 0.05, "fixed_iterations": None, "max_iterations": 500}  # fmt: skip


@pytest.mark.parametrize(
    "line",
    [
        "STASH-PROGRESS {}",  # a script's own print: it crashed the profile with a KeyError
        'STASH-PROGRESS "x"',
        "STASH-PROGRESS []",
        'STASH-PROGRESS {"iterations": "3", "kept": 1, "max_iterations": 5, "target_relative_ci": 0.1}',
        'STASH-PROGRESS {"iterations": true, "kept": 1, "max_iterations": 5, "target_relative_ci": 0.1}',
        'STASH-PROGRESS {"iterations": 3, "kept": 1, "max_iterations": -5, "target_relative_ci": 0.1}',
        'STASH-PROGRESS {"iterations": 3, "kept": 1, "max_iterations": 5, "target_relative_ci": "a"}',
        "STASH-RESULT 3",
        "STASH-PHASE null",
        "STASH-DONE []",
        "STASH-ERROR 7",
        "STASH-PROGRESS " + "[" * 100_000,
    ],
)
def test_a_line_that_holds_the_marker_but_not_a_message_is_output(line):
    assert protocol.parse(line) is None


def test_the_messages_the_workers_send_are_taken():
    for kind, payload in [("PROGRESS", PROGRESS), ("ERROR", "boom"), ("ERROR", {"message": "boom"})]:
        stream = io.StringIO()
        protocol.emit(kind, payload, stream)
        assert protocol.parse(stream.getvalue().strip()) == (kind, payload)


def test_a_launchs_workers_mark_their_lines_and_the_launcher_reads_only_its_own(monkeypatch):
    """What the code a worker runs prints on the same stdout (a script's print("STASH-ERROR boom")) is
    output: the launcher reads only lines of its launch's token."""
    token = protocol.new_token()
    monkeypatch.setattr(protocol, "_token", [token])
    stream = io.StringIO()
    protocol.emit("RESULT", {"mean_s": 0.5}, stream)
    line = stream.getvalue().strip()
    assert line.startswith(f"STASH-RESULT@{token} ")
    assert protocol.parse(line, token) == ("RESULT", {"mean_s": 0.5})
    assert protocol.parse(line) is None and protocol.parse(line, protocol.new_token()) is None
    assert protocol.parse('STASH-ERROR "fake error from the script"', token) is None
    assert protocol.parse(f"STASH-ERROR@{token}x \"near\"", token) is None


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
