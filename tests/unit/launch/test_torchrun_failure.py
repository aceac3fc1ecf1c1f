"""The one line a failed local run is reported by: the worker's exception, else torchrun's root cause."""

from __future__ import annotations

from stash_core.launch.torchrun_failure import OOM_HINT, failure_line, root_cause, signal_of

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
    assert root_cause(lines) == "rank 1 (pid 4242) was ended by SIGABRT"


def test_without_an_exception_the_root_cause_names_rank_and_signal() -> None:
    assert root_cause(SUMMARY) == "rank 1 (pid 4242) was ended by SIGABRT"
    assert signal_of(root_cause(SUMMARY)) == "SIGABRT"
    assert signal_of("rank 1 (local_rank: 1) exited with code -6 (pid: 42)") == "SIGABRT"  # as stored before
    assert signal_of("rank 1 exited with code 1 (pid: 42)") is None


# torchrun's summary of a rank killed by SIGKILL: the peer it then ended with SIGTERM is listed first.
KILLED = [
    "[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:31665: Connection "
    "reset by peer. This is typically caused by a remote worker hanging. GLHF! \U0001f3d6\x1b[0m",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "=======================================================",
    "Failures:",
    "[1]:",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -15 (pid: 22423)  (SIGTERM)",
    "  traceback : Signal 15 (SIGTERM) received by PID 22423",
    "-------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -9 (pid: 22424)  (SIGKILL)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 22424",
    "=======================================================",
]
PEER_LOST = "rank 0 (vm): RuntimeError: Read error: Connection reset by peer. GLHF! \U0001f3d6\x1b[0m"


def test_a_rank_killed_by_sigkill_is_named_first_with_what_likely_killed_it() -> None:
    """It read 'rank 1 (local_rank: 1) exited with code -9 (pid: 22424)  (SIGKILL) (...); first worker error:
    rank 0 (vm): RuntimeError: ... Connection reset by peer ... GLHF! 🏖️': no hint of the out-of-memory
    killer, and the peer's consequent error called the first."""
    cause = root_cause(KILLED)
    assert cause == f"rank 1 (pid 22424) was killed by SIGKILL ({OOM_HINT})"
    line = failure_line(cause, [PEER_LOST], remote=False)
    assert line == cause and "first worker error" not in line
    across = failure_line(f"node 1 (10.0.0.2) exited with code 1: {cause}", [PEER_LOST], remote=True)
    assert across.endswith(cause)


def test_with_a_signal_the_dead_rank_s_own_error_is_kept_and_control_characters_written_out() -> None:
    cause = root_cause(KILLED)
    own = "rank 1 (vm): MemoryError: out of \x1b[31mmemory"
    line = failure_line(cause, [PEER_LOST, own], remote=False)
    assert line == f"{cause}; it reported: rank 1 (vm): MemoryError: out of \\x1b[31mmemory"
    other = failure_line(cause, [PEER_LOST, "rank 0 (vm): ValueError: x\ny"], remote=False)
    assert other == f"{cause}; another rank reported: rank 0 (vm): ValueError: x\\ny"


def test_a_probe_worker_s_error_is_its_rank_s_own_and_rank_10_is_not_rank_1() -> None:
    """A probe worker writes "rank 1: ..." (no host): the dead rank's own error was reported as another's."""
    cause = root_cause(KILLED)
    probe = "rank 1: RuntimeError: out of memory"
    assert failure_line(cause, [PEER_LOST, probe], remote=False) == f"{cause}; it reported: {probe}"
    tenth = "rank 10 (vm): ValueError: x"
    assert failure_line(cause, [tenth], remote=False) == f"{cause}; another rank reported: {tenth}"


def test_banners_are_never_the_reason() -> None:
    assert root_cause(["some output", "=====", "-----"]) == "some output"
    assert root_cause(["=====", ""]) == "the run exited without a result"


def test_a_long_failure_keeps_the_end_of_its_cause_and_says_it_was_cut() -> None:
    dead = "rank 1 (pid 4242) was ended by SIGKILL"
    own = "rank 1 (host-a): RuntimeError: " + "x" * 900 + " in bucket 7"
    line = failure_line(dead, [own], remote=False)
    whole = len(f"{dead}; it reported: {own}")
    assert line.startswith(dead) and line.endswith(f" in bucket 7 ({whole} characters)")  # it was cut at 600


def test_a_collective_that_waited_past_the_timeout_says_what_to_raise() -> None:
    """--comm-timeout 5 on a 10 Mbit/s link ended in gloo's own words, nothing on what to change."""
    from stash_core.launch.torchrun_failure import timeout_hint

    gloo = "rank 1 (vm): RuntimeError: [.../unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation"
    hint = timeout_hint(gloo, 5)
    assert hint.startswith("; a collective waited past --comm-timeout (5 s)")
    assert hint.endswith("raise --comm-timeout")
    assert timeout_hint("rank 1 (vm): connection reset by peer", 5) == ""
    assert timeout_hint(None, 5) == ""
