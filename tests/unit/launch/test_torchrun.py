"""launch/torchrun.py: torchrun's own main(), output and exit status, ended without the interpreter's teardown
once it succeeded, while a failure takes torchrun's ordinary way out. Real torchrun launches of tiny scripts
(their workers import nothing heavy); an exit handler registered before torchrun starts tells whether the
interpreter's teardown ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stash_core.launch import multinode, torchrun

pytestmark = pytest.mark.launches

TEARDOWN = "teardown ran"


def _torchrun(tmp_path: Path, module: str, *args: str, script: str = "") -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` with an exit handler that prints TEARDOWN, beside a job.py holding `script`."""
    (tmp_path / "job.py").write_text(script)
    source = (
        f"import atexit, runpy; atexit.register(print, {TEARDOWN!r}, flush=True); "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # torchrun's torchelastic_* log folder goes there
    return subprocess.run(
        [sys.executable, "-c", source, *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip


ONE_WORKER = ("--standalone", "--nnodes", "1", "--nproc-per-node", "1", "--max-restarts", "0", "job.py")


def test_a_run_that_succeeds_gives_torchruns_output_and_skips_the_teardown(tmp_path) -> None:
    script = "print('hello from the worker', flush=True)\n"
    quick = _torchrun(tmp_path, "stash_core.launch.torchrun", *ONE_WORKER, script=script)
    assert quick.returncode == 0, quick.stderr
    assert "hello from the worker" in quick.stdout
    assert TEARDOWN not in quick.stdout
    plain = _torchrun(tmp_path, "torch.distributed.run", *ONE_WORKER, script=script)  # the same, torch's own
    assert plain.returncode == 0 and "hello from the worker" in plain.stdout
    assert TEARDOWN in plain.stdout  # the handler would have shown a teardown


def test_a_failing_worker_keeps_torchruns_exit_status_and_root_cause(tmp_path) -> None:
    done = _torchrun(tmp_path, "stash_core.launch.torchrun", *ONE_WORKER, script="raise ValueError('bad')\n")
    assert done.returncode == 1
    assert "ChildFailedError" in done.stderr and "ValueError: bad" in done.stderr
    assert TEARDOWN in done.stdout


def test_bad_arguments_keep_torchruns_usage_and_exit_status(tmp_path) -> None:
    done = _torchrun(tmp_path, "stash_core.launch.torchrun", "--no-such-option", "job.py")
    assert done.returncode == 2
    assert "usage:" in done.stderr and "--nproc-per-node" in done.stderr


def test_remote_nodes_run_the_same_source() -> None:
    """Sent by its source, as the supervisor is (test_supervisor.py: it needs only torch beside the standard
    library)."""
    argv = multinode._node_argv(0, 2, "t-n0", 1, "m", [], "10.0.0.1", 29500, {}, "python3", "/w", None, 30)
    start = argv.index("python3", 1)
    assert argv[start : start + 5] == ["python3", "-c", Path(torchrun.__file__).read_text(), "--nnodes", "2"]


def test_stash_workers_on_the_cpu_are_forked_and_everything_else_started_anew() -> None:
    worker = "stash_core.measure.worker"
    file = str(Path(torchrun.__file__).parents[1] / "measure" / "worker.py")
    assert torchrun.entry(worker, on_cpu=True) == [torchrun.FORK_OPTION, worker]
    # where torchrun runs, the module's file there, forked
    assert torchrun.torchrun_args(["--nnodes", "1", *torchrun.entry(worker, on_cpu=True), "--job", "x"]) == [
        "--nnodes", "1", "--run-path", "--start-method", "fork", file, "--job", "x",
    ]  # fmt: skip
    assert torchrun.entry(worker, on_cpu=False) == ["-m", worker]  # a GPU: torchrun has touched CUDA
    script = "stash_core.measure.script_entry"  # a user's script runs as torchrun runs it
    assert torchrun.entry(script, on_cpu=True) == ["-m", script]
    assert torchrun.torchrun_args(["--nnodes", "1", "-m", script]) == ["--nnodes", "1", "-m", script]


def test_a_remote_nodes_stash_workers_are_forked_from_its_own_copy() -> None:
    worker = "stash_core.measure.worker"
    argv = multinode._node_argv(0, 2, "t", 1, worker, ["--job", "x"], "10.0.0.1", 29500, {}, "python3", "/w",
                                None, 30, on_cpu=True)  # fmt: skip
    assert argv[-4:] == [torchrun.FORK_OPTION, worker, "--job", "x"]  # its file is found on the node
    argv = multinode._node_argv(0, 2, "t", 1, worker, [], "10.0.0.1", 29500, {}, "python3", "/w", None, 30)
    assert argv[-2:] == ["-m", worker]


def test_a_forked_module_that_is_not_there_is_one_line() -> None:
    with pytest.raises(SystemExit, match="^torchrun: no module named no_such_stash_module on this machine$"):
        torchrun.torchrun_args(["--standalone", torchrun.FORK_OPTION, "no_such_stash_module", "--job", "x"])
