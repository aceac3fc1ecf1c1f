"""The one line a failed local run is reported by: the worker's exception, else torchrun's root cause."""

from __future__ import annotations

from stash_core.launch.torchrun_failure import root_cause

SUMMARY = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "stash_core.measure.worker FAILED",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-11-24_10:00:00",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -6 (pid: 4242)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 4242",
    "============================================================",
]


def test_the_workers_exception_wins_over_the_launchers_summary() -> None:
    summary = [line.replace("-6 (pid", "1 (pid") for line in SUMMARY]
    lines = ["Traceback (most recent call last):", '  File "w.py", line 3, in step',
             "[rank1]: RuntimeError: Connection closed by peer", *summary]  # fmt: skip
    assert root_cause(lines) == "RuntimeError: Connection closed by peer"


def test_a_rank_ended_by_a_signal_is_the_cause_not_its_peers_lost_connection() -> None:
    lines = ["[rank0]: RuntimeError: Connection closed by peer", *SUMMARY]
    assert root_cause(lines).startswith("rank 1 (local_rank: 1) exited with code -6")


def test_without_an_exception_the_root_cause_names_rank_exit_code_and_signal() -> None:
    line = root_cause(SUMMARY)
    assert line.startswith("rank 1 (local_rank: 1) exited with code -6")
    assert "SIGABRT" in line


def test_banners_are_never_the_reason() -> None:
    assert root_cause(["some output", "=====", "-----"]) == "some output"
    assert root_cause(["=====", ""]) == "the run exited without a result"
