"""The progress lines on a terminal carry a script's own text (a warning) as text: escapes
written out (terminal.printable), never acted on, and nothing after a carriage return lost."""

from __future__ import annotations

import io

from stash_core.engine.progress import BarReporter


def test_a_message_is_printed_as_text_and_a_failed_runs_error_is_left_to_the_profile_s_own_line() -> None:
    """A failed run's error was on its progress line and again on the line the profile ends with: said once,
    at the end (every front end prints or raises it)."""
    stream = io.StringIO()
    reporter = BarReporter(stream)
    reporter.phase_finished({"name": "R0", "status": "failed",
                             "error": "the script raised RuntimeError: boom \x1b[31mred\x1b[0m \r\x08 end"})  # fmt: skip
    reporter.message("warning: \x1b]0;title\x07 from the script")
    text = stream.getvalue()
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\x08" not in text
    assert "boom" not in text and "R0: failed" in text and "\\x1b]0;title\\x07" in text


def test_a_reader_that_has_gone_stops_the_progress_not_the_profile() -> None:
    """`stash profile 2>&1 | head -3`: the next progress line raised BrokenPipeError, which ended the profile
    with status 0 and no run saved."""

    class ClosedPipe(io.StringIO):
        writes = 0

        def write(self, text: str) -> int:
            ClosedPipe.writes += 1
            raise BrokenPipeError(32, "Broken pipe")

    reporter = BarReporter(ClosedPipe())
    reporter.message("round 1 of 3: R0")
    reporter.phase_finished({"name": "R0", "status": "failed", "error": "x"})
    reporter.message("round 2 of 3: R0")
    assert reporter.reader_gone and ClosedPipe.writes == 1  # tried once, then nothing more


def test_progress_bar_draws_the_bar_where_auto_draws_lines() -> None:
    """--progress bar was --progress auto: off a terminal (a pipe, a log) no bar was drawn."""
    from stash_core.api.profile_flow import make_reporter

    payload = {"phase": "R0", "iterations": 10, "kept": 8, "mean_s": 0.1, "relative_ci": 0.1,
               "target_relative_ci": 0.02, "fixed_iterations": None, "max_iterations": 2000,
               "fraction_done": 0.25}  # fmt: skip
    drawn = {}
    for mode in ("auto", "bar"):
        reporter = make_reporter(mode)
        reporter.stream = io.StringIO()  # no terminal
        reporter.progress(payload)
        drawn[mode] = reporter.stream.getvalue()
    assert drawn["auto"] == "" and "\r" in drawn["bar"]
