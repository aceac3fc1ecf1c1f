"""How a command ends when the reader of its output has gone (`stash ... 2>&1 | head`): the status it earned,
not a traceback or Python's status 120."""

from __future__ import annotations

import io
import sys

import pytest

from stash_core.exits import run_command


class ClosedPipe(io.StringIO):
    """A stream whose reader has gone: every write raises, as a pipe after `head` exits does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")


def test_an_interrupt_with_stderr_closed_exits_with_its_own_status(monkeypatch):
    monkeypatch.setattr(sys, "stderr", ClosedPipe())

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_command(interrupted) == 130


def test_a_failure_with_stderr_closed_keeps_its_status(monkeypatch):
    from stash_core.errors import UsageError

    monkeypatch.setattr(sys, "stderr", ClosedPipe())

    def refused() -> int:
        raise UsageError("bad input")

    assert run_command(refused) == 2


def test_output_whose_reader_has_gone_ends_the_command_quietly_with_sigpipes_status(monkeypatch):
    """It ended 0, whatever the command would have returned: a refusal piped into `head` passed pipefail."""
    monkeypatch.setattr(sys, "stdout", ClosedPipe())

    def prints() -> int:
        print('{"error": "no configuration finishes within 0.001 h", "exit_status": 1}')
        return 1

    assert run_command(prints) == 141


def _refused() -> int:
    from stash_core.errors import UsageError

    raise UsageError("unknown instance(s) nosuch")


def test_a_json_refusal_reaches_stdout_where_nobody_reads_stderr(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", ClosedPipe())
    assert run_command(_refused, json_errors=True) == 2
    assert out.getvalue() == '{"error": "unknown instance(s) nosuch", "exit_status": 2}\n'


def test_a_json_refusal_whose_stdout_reader_has_gone_keeps_its_status_and_its_line(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    monkeypatch.setattr(sys, "stderr", err)
    assert run_command(_refused, json_errors=True) == 2
    assert err.getvalue() == "stash: unknown instance(s) nosuch\n"


def test_a_command_asked_for_json_and_stopped_says_why_on_stdout(monkeypatch):
    """An interrupt or SIGTERM (a CI job's timeout) left stdout empty: json.loads of it failed, where the docs
    promise {"error": ..., "exit_status": N} for every failure of a command asked for JSON."""
    import json
    import signal

    from stash_core.interrupts import Stopped

    for stop, status, words in ((KeyboardInterrupt(), 130, "interrupted"),
                                (Stopped(signal.SIGTERM), 143, "terminated (SIGTERM)")):  # fmt: skip
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)

        def stopped(stop=stop) -> int:
            raise stop

        assert run_command(stopped, json_errors=True) == status
        assert json.loads(out.getvalue()) == {"error": words, "exit_status": status}
        assert err.getvalue() == f"stash: {words}\n"
        assert run_command(stopped) == status  # not asked for JSON: nothing on stdout
        assert out.getvalue().count("\n") == 1


@pytest.mark.parametrize("kind", ["Error", "IOException"])  # DuckDB 2's, and DuckDB 1.x's
def test_a_corrupt_block_read_after_the_open_is_one_line_not_a_traceback(capsys, kind):
    """Damage the open-time checks do not read (a block in the file's middle) raised DuckDB's Error."""
    import duckdb

    def reads_a_damaged_block() -> int:
        raise getattr(duckdb, kind)("Corrupt database file: computed checksum 1 does not match checksum 2")

    assert run_command(reads_a_damaged_block) == 2
    err = capsys.readouterr().err
    assert err.startswith("stash: the database is corrupt (Corrupt database file: computed checksum 1")
    assert err.count("\n") == 1 and "stash ingest --skip-bad results/*.json --db NEW.duckdb" in err


def test_an_error_that_echoes_a_huge_argument_is_cut_to_a_line_a_terminal_can_show(tmp_path, capsys):
    """`stash show` of a 100,000-character run id wrote a 100,029-byte line to the standard error."""
    from stash_core.cli.main import main
    from stash_core.exits import MAX_ERROR_CHARS

    assert main(["show", "a" * 100_000, "--db", str(tmp_path / "r.duckdb")]) == 2
    err = capsys.readouterr().err
    assert len(err) < MAX_ERROR_CHARS + 100 and err.rstrip().endswith("more characters)")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 20480000000 bytes. Error code 12 (Cannot allocate memory)"),
    MemoryError(),
])  # fmt: skip
def test_an_allocation_that_fails_is_one_line_not_a_traceback(capsys, error):
    """A model larger than the machine's memory ended in torch's allocator traceback."""

    def allocates() -> int:
        raise error

    assert run_command(allocates) == 1
    err = capsys.readouterr().err
    assert err.startswith("stash: out of memory") and err.count("\n") == 1 and "MemoryError" not in err


def test_another_runtime_error_is_still_a_bug_with_its_traceback():
    def fails() -> int:
        raise RuntimeError("expected a tensor of rank 4")

    with pytest.raises(RuntimeError, match="rank 4"):
        run_command(fails)
