"""Helpers shared by tests that drive the `stash` command as a user would."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
TINY_CNN = f"{REPO}/examples/models/tiny_cnn.py:make"
# A model and input small enough that a run's cost is mostly process start-up.
SMALL = ["--model", TINY_CNN, "--input-shape", "3,32,32", "--batch-size", "4", "--loader-workers", "1"]
# A profile of one run, R0 (one worker, synthetic data): what tests/conftest.py's `measured_launch` measures.
ONE_RUN = [*SMALL, "--workers", "1", "--stalls", "compute", "--iterations", "4"]


def stash(*args: str, env_extra: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    """Run `python -m stash_core ARGS` and return the CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "stash_core", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def stash_here(capsys, monkeypatch, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`stash ARGS` by calling main() in this process (no interpreter and torch import to pay for): for a
    command refused before anything starts. The same CompletedProcess as stash() gives; `cwd` as there."""
    from stash_core.cli.main import main

    if cwd is not None:
        monkeypatch.chdir(cwd)
    capsys.readouterr()  # only this command's output
    code = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["stash", *args], code, captured.out, captured.err)


def stash_main(
    *args: str, env_extra: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """`stash ARGS` by calling main() in this process, as stash() runs it in a new one (the same environment
    additions, folder and CompletedProcess), less the interpreter and the imports a new process pays for; both
    are restored afterwards. For fixtures of any scope (stash_here needs the function-scoped capsys)."""
    from stash_core.cli.main import main

    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env_extra or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["stash", *args], code, out.getvalue(), err.getvalue())


def profile_two_workers(tmp_path: Path, source: str, *flags: str, progress: str = "auto"):
    """`stash profile` of the model file `source` (its factory `make`) on two CPU workers: R0 and R1 only,
    three iterations, 3x2x2 inputs at batch 4, no probes; in this process (stash_main)."""
    model = tmp_path / "m.py"
    model.write_text(source)
    return stash_main(
        "profile", "--model", f"{model}:make", "--batch-size", "4", "--input-shape", "3,2,2",
        "--workers", "2", "--device", "cpu", "--stalls", "interconnect", "--iterations", "3",
        "--launches", "1", "--no-probes", "--progress", progress, "--db", str(tmp_path / "runs.duckdb"),
        *flags, cwd=tmp_path,
    )  # fmt: skip


def replay_launches(monkeypatch, outcomes: list[dict]) -> None:
    """Make the engine's launches give these outcomes again, in order (as run_phase returned them for a real
    profile: tests/conftest.py's `measured_launch`), for a test of what a profile does with its measurements
    rather than of the measuring."""
    from stash_core.engine import profiler

    replayed = iter(copy.deepcopy(outcomes))
    monkeypatch.setattr(profiler, "run_phase", lambda *_, **__: next(replayed))


def one_line_error(result) -> str:
    """The single stderr line of a refused command (and no traceback)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def shown(markdown: str) -> str:
    """What a reader sees of a page's Markdown text: its backslash escapes (views.common.plain) undone."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def processes_carrying(token: str) -> list[psutil.Process]:
    """Live (not zombie) processes whose command line holds `token` as one of its words."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if token in (process.info["cmdline"] or []) and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def ended_pid() -> int:
    """The id of a process that has ended (a killed one's, for the sweeps of what it left)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


@contextlib.contextmanager
def mounted_tmpfs(target: Path, size: str):
    """A tmpfs of `size` (mount's notation: "16m") mounted at the folder `target` (made), unmounted afterwards
    whatever the test did; the test is skipped where one cannot be mounted (it needs root)."""
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a full file system is made with a small tmpfs, which needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("mount/umount are not installed")
    name = f"stash-full-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", name, str(target)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield target
    finally:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


def fill(folder: Path, keep_bytes: int = 0) -> None:
    """Fill the file system of `folder` up to all but `keep_bytes` (none: until it refuses a write)."""
    free = shutil.disk_usage(folder).free - keep_bytes
    with (folder / "filler").open("wb") as handle:
        try:
            while free > 0 or not keep_bytes:
                chunk = min(free, 1 << 16) if free > 0 else 1 << 16
                handle.write(b"\0" * chunk)
                handle.flush()
                free -= chunk
        except OSError:  # full before the estimate ran out
            pass


DUCKDB_BLOCK_BYTES = 262144  # DuckDB's block; its file starts with three 4 KiB headers


def damaged_copy(template: Path, folder: Path) -> Path | None:
    """A copy of the DuckDB file `template` with one block overwritten whose damage only a read of the runs
    finds (the open's checks pass); None where no block of the runs table was found to damage."""
    import duckdb

    for block in range(template.stat().st_size // DUCKDB_BLOCK_BYTES):
        db = folder / f"block{block}.duckdb"
        shutil.copyfile(template, db)
        with db.open("r+b") as file:
            file.seek(3 * 4096 + block * DUCKDB_BLOCK_BYTES + 1000)
            file.write(b"\xab" * 3000)
        try:
            with duckdb.connect(str(db), read_only=True) as con:
                try:
                    con.execute("SELECT * FROM runs").fetchall()
                except duckdb.Error as exc:
                    if "Corrupt database file" in str(exc):
                        return db
        except duckdb.Error:  # the open itself found it
            pass
        db.unlink()
    return None
