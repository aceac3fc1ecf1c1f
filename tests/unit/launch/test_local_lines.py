"""A launch's lines reach on_line as soon as they are written, every one of them: lines that arrive in one
read are not held back until the next write (a held LOOP_END would look like a hung rank)."""

from __future__ import annotations

import os
import sys
import time

from stash_core.launch.local import _Lines, run_local


def test_lines_read_together_are_all_given_at_once() -> None:
    read, write = os.pipe()
    lines = _Lines("out")
    os.write(write, b"STASH-PROGRESS {}\nSTASH-LOOP_END {}\npart")
    assert lines.read(read) == (["STASH-PROGRESS {}", "STASH-LOOP_END {}"], False)
    os.write(write, b"ial\n")
    assert lines.read(read) == (["partial"], False)
    os.write(write, b"no newline at the end")
    os.close(write)
    assert lines.read(read) == ([], False)  # the data, kept until its line ends
    assert lines.read(read) == (["no newline at the end"], True)  # the EOF ends it
    os.close(read)


def test_a_carriage_return_ends_a_line_and_crlf_ends_one() -> None:
    read, write = os.pipe()
    lines = _Lines("err")
    os.write(write, b"10%\r20%\r")  # a progress bar; the last "\r" may be the first half of a "\r\n"
    assert lines.read(read) == (["10%"], False)
    os.write(write, b"\ndone\r\n")
    assert lines.read(read) == (["20%", "done"], False)
    os.close(write)
    assert lines.read(read) == ([], True)
    os.close(read)


def test_a_last_line_without_newline_and_both_streams_come_through() -> None:
    code = "import sys; sys.stdout.write('one\\ntwo\\nthree'); sys.stderr.write('oops\\n')"
    got: list[str] = []
    assert run_local([sys.executable, "-c", code], got.append, timeout_s=60) == []
    assert sorted(got) == ["one", "oops", "three", "two"]


def test_the_loop_end_is_seen_while_the_command_still_runs() -> None:
    # Two lines in one write, then a long quiet spell: both must arrive before the command ends.
    code = (
        "import sys, time\n"
        "sys.stdout.write('first\\nsecond\\n'); sys.stdout.flush()\n"
        "time.sleep(3)\n"
        "print('third', flush=True)\n"
    )
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    run_local([sys.executable, "-c", code], lambda line: seen.append((line, time.monotonic() - started)),
              timeout_s=60)  # fmt: skip
    at = dict(seen)
    assert at["second"] < at["third"] - 2.0


def test_a_launch_closes_its_pipes() -> None:
    """The launch read its child's stdout and stderr raw and never closed them: two ResourceWarnings a
    launch, six a profile from Python."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert run_local([sys.executable, "-c", "print('hi')"], lambda line: None, timeout_s=60) == []
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
