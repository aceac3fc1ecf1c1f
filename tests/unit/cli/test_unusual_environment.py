"""The environment a command runs in: no home folder, a full or closed stdout or stderr, a current folder that
was removed, a locale whose file names are not UTF-8. Each is answered, or said in one line with a non-zero
exit status: never a traceback, and nothing stored under a name the user did not give."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import REPO

from stash_core.errors import StashError, UsageError


def _run(args: list[str], tmp_path: Path, env: dict | None = None, **streams) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "STASH_CACHE_DIR": str(tmp_path / "cache"),
                   **(env or {})}  # fmt: skip
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    return subprocess.run(args, env=environment, text=True, timeout=300, cwd=tmp_path, **streams)


class FullStream(io.StringIO):
    """A stream on a full device (/dev/full): every write fails."""

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


def _stash(*args: str) -> list[str]:
    return [sys.executable, "-m", "stash_core", *args]


def test_json_asked_with_stdout_on_a_full_device_is_one_line_not_a_traceback(tmp_path):
    with open("/dev/full", "w") as full:
        predict = _stash("predict", "--model", "resnet18", "--batch-size", "8", "--instances", "p3.2xlarge",
                         "--format", "json", "--db", str(tmp_path / "r.duckdb"))  # fmt: skip
        done = _run(predict, tmp_path, stdout=full)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "stash: the answer could not be written to standard output: No space left on device"
    ], done.stderr


@pytest.mark.parametrize("args", [["--help"], ["predict", "--help"], ["--version"], ["models"]])
def test_help_or_a_short_answer_on_a_full_device_is_said_not_lost(tmp_path, args):
    """argparse drops a failed write of its help, and a short answer waits in stdout's buffer until Python's
    exit (whose failed flush printed "Exception ignored" and ended 120), unless PYTHONUNBUFFERED is set."""
    buffered = ["env", "-u", "PYTHONUNBUFFERED", *_stash(*args)]
    with open("/dev/full", "w") as full:
        done = _run(buffered, tmp_path, stdout=full)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        1, ["stash: the answer could not be written to standard output: No space left on device"])


def test_a_removed_current_folder_is_said_in_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && exec {sys.executable} -m stash_core runs"
    done = _run(["sh", "-c", script], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "stash: the current folder no longer exists (it was removed): cd to a folder that does, and run the "
        "command again"
    ]


def test_utf8_names_under_an_ascii_locale_are_refused_for_what_they_are(tmp_path):
    name = str(tmp_path / "résultats.duckdb")
    done = _run(_stash("show", "--db", name, "run"), tmp_path, env={"LC_ALL": "C", "PYTHONUTF8": "0"})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "is UTF-8 but this locale's encoding is" in line and "LC_ALL=C.UTF-8" in line
    bad_bytes = _run(_stash("show", "--db", "/tmp/r\udcffs", "run"), tmp_path)  # not UTF-8 at all
    assert bad_bytes.returncode == 2 and "is not UTF-8 text" in bad_bytes.stderr


def test_a_path_duckdb_would_open_under_another_name_is_refused(tmp_path, monkeypatch):
    """In an ISO-8859-1 locale Python reads `é` as one byte, which DuckDB, taking UTF-8, writes as two."""
    from stash_core.store import dbfile
    from stash_core.store.connection import connect
    from stash_core.store.export import export

    monkeypatch.setattr(dbfile.os, "fsencode", lambda text: str(text).encode("latin-1"))
    monkeypatch.setattr(dbfile.sys, "getfilesystemencoding", lambda: "iso8859-1")
    with pytest.raises(UsageError, match="DuckDB opens file names as UTF-8 and this locale's are iso8859-1"):
        with connect(tmp_path / "nouvé.duckdb"):
            pass
    with connect(tmp_path / "plain.duckdb"):  # an ASCII name is the same bytes either way
        pass
    with pytest.raises(UsageError, match="export folder"):
        export(tmp_path / "plain.duckdb", "csv", tmp_path / "exporté")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plain.duckdb"]


def test_with_no_home_folder_counted_steps_are_not_kept_and_data_sets_ask_for_a_folder(tmp_path, monkeypatch):
    from stash_core import pathargs
    from stash_core.pathargs import dataset_cache_root
    from stash_core.decide.predict.step_cache import cache_dir, cached

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    for variable in ("STASH_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(pathargs.Path, "home", staticmethod(no_home))
    assert pathargs.home_folder() is None and pathargs.user_cache_dir("steps") is None and cache_dir() is None
    counted = []
    assert cached(("resnet18", 2, None, "fused"), lambda: counted.append(1) or "count", dict) == "count"
    assert counted == [1]
    with pytest.raises(UsageError, match="set STASH_CACHE_DIR to a folder, or give --dataset"):
        dataset_cache_root()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "stash" / "steps"


def test_progress_with_stderr_closed_or_full_goes_on_without_it(monkeypatch):
    from stash_core.engine.progress import BarReporter

    monkeypatch.setattr(sys, "stderr", None)  # fd 2 closed before Python started (`2>&-`)
    quiet = BarReporter()
    quiet.message("a note")
    assert quiet.reader_gone and not quiet.tty

    full = BarReporter(FullStream())
    full.message("a note")
    full.message("another")
    assert full.reader_gone


def test_a_saved_profile_whose_breakdown_cannot_be_printed_says_it_was_saved(monkeypatch):
    from stash_core.cli import profile as cli_profile

    def full(run):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli_profile, "_print_breakdown", full)
    run = SimpleNamespace(doc={"run_id": "20261202T000000Z-abcdef12"}, error=None, problem=None,
                          where="out/run.json and results.duckdb")  # fmt: skip
    said = (r"run 20261202T000000Z-abcdef12 was saved to out/run.json and results.duckdb, but its breakdown "
            r"could not be written to standard output: No space left on device")
    with pytest.raises(StashError, match=said):
        cli_profile.report_result(run)
    monkeypatch.setattr(sys, "stdout", FullStream())
    cli_profile._note("note: a new database")  # a note before the profile runs stops nothing


def test_a_closed_standard_descriptor_is_not_taken_by_the_next_file_opened(tmp_path):
    """With `2>&-` the database file opened next became descriptor 2, where a library's own write to stderr
    would land; a command now starts with /dev/null there."""
    script = (
        "import os, sys\n"
        "from stash_core.exits import run_command\n"
        "def body():\n"
        f"    handle = open({str(tmp_path / 'data.bin')!r}, 'wb')\n"
        "    print(os.readlink('/proc/self/fd/2'), sys.stderr is None)\n"
        "    handle.close()\n"
        "sys.exit(run_command(body))\n"
    )
    done = _run([sys.executable, "-c", script], tmp_path, stderr=subprocess.DEVNULL,
                preexec_fn=lambda: os.close(2))  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.split() == ["/dev/null", "True"]


def test_a_command_started_with_stdout_closed_says_its_answer_could_not_be_shown(tmp_path):
    """`stash runs >&-` printed nothing and ended 0, as if it had shown the runs."""
    from stash_core.catalog import seed_catalog

    seed_catalog(tmp_path / "r.duckdb")  # a database there: `runs` has an answer to show
    done = _run(_stash("runs", "--db", str(tmp_path / "r.duckdb")), tmp_path, stdout=None,
                preexec_fn=lambda: os.close(1))  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "stash: standard output is closed (>&-): the command's answer could not be shown"
    ], done.stderr


def test_under_an_ascii_locale_symbols_take_an_ascii_form_and_names_their_escapes():
    from stash_core.exits import _ascii_forms

    text = "±0.1 × 2 café"
    assert text.encode("ascii", "stash_ascii_forms") == b"+-0.1 x 2 caf\\xe9"
    with pytest.raises(UnicodeDecodeError):
        _ascii_forms(UnicodeDecodeError("ascii", b"\xff", 0, 1, "not ascii"))
