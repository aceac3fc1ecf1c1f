"""A user's model code changes what is the process's while it runs (os._exit, sys.path,
sys.dont_write_bytecode): threads of one process (a notebook's, a service's) and the processes it forks find
them as they were, before, during and after."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support import REPO

from stash_core.errors import UserModelError
from stash_core.zoo.user import call_user_factory

SLOW_FACTORY = """
import time
from torch import nn
def make():
    time.sleep({sleep_s})
    return nn.Linear(2, 2)
"""


def _model_file(folder: Path, name: str, sleep_s: float) -> Path:
    path = folder / f"{name}.py"
    path.write_text(SLOW_FACTORY.format(sleep_s=sleep_s))
    return path


def test_two_threads_running_model_files_leave_os_exit_and_bytecode_as_they_were(tmp_path):
    """Thread B saved thread A's stand-in for os._exit as the real one and put it back for good: a DataLoader
    worker forked later ended in UserCodeExit instead of exiting."""
    real_exit, writes_bytecode = os._exit, sys.dont_write_bytecode
    first, second = _model_file(tmp_path, "first", 0.4), _model_file(tmp_path, "second", 0.4)
    errors: list[BaseException] = []

    def build(path: Path, delay_s: float) -> None:
        time.sleep(delay_s)
        try:
            call_user_factory(f"{path}:make", None, 10)
        except BaseException as error:  # noqa: BLE001 - the assertion reports it
            errors.append(error)

    starts = ((first, 0), (second, 0.15))  # the second starts while the first one's factory runs
    threads = [threading.Thread(target=build, args=start) for start in starts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert os._exit is real_exit
    assert sys.dont_write_bytecode is writes_bytecode


def test_a_process_forked_while_a_model_file_runs_exits_as_it_asks(tmp_path):
    """os._exit in a child forked by another thread while the user's code ran raised UserCodeExit there, and
    the child went on running its parent's code."""
    model = _model_file(tmp_path, "slow", 0.6)
    script = textwrap.dedent(f"""
        import os, sys, threading, time
        from stash_core.zoo.user import call_user_factory
        builder = threading.Thread(target=call_user_factory, args=({str(model) + ':make'!r}, None, 10))
        builder.start()
        time.sleep(0.2)  # the factory is running
        child = os.fork()
        if child == 0:
            os._exit(7)
        _, status = os.waitpid(child, 0)
        builder.join()
        print("child", os.waitstatus_to_exitcode(status), "from", os.getpid())
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["child", "7"] and len(done.stdout.splitlines()) == 1, done.stdout


def test_a_model_file_calling_os_exit_is_still_refused(tmp_path):
    path = tmp_path / "exits.py"
    path.write_text("import os\ndef make():\n    os._exit(3)\n")
    with pytest.raises(UserModelError, match=r"called os._exit\(3\)"):
        call_user_factory(f"{path}:make", None, 10)


def test_a_module_lookup_leaves_sys_path_as_it_was(tmp_path, monkeypatch):
    """A module reference tried in the current folder appended that folder to sys.path for good, where its
    files then shadowed modules for every later import of a long-running process."""
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    with pytest.raises(UserModelError, match="cannot import model module stash_no_such_pkg.mod"):
        call_user_factory("stash_no_such_pkg.mod:make", None, 10)
    assert sys.path == before


def test_a_package_in_the_current_folder_may_import_its_neighbours_as_its_factory_runs(tmp_path, monkeypatch):
    (tmp_path / "stash_cwd_pkg").mkdir()
    (tmp_path / "stash_cwd_pkg" / "__init__.py").write_text("")
    (tmp_path / "stash_cwd_helper.py").write_text("WIDTH = 5\n")
    (tmp_path / "stash_cwd_pkg" / "nets.py").write_text(
        "from torch import nn\n"
        "def make():\n"
        "    import stash_cwd_helper  # a top-level module beside the package, imported late\n"
        "    return nn.Linear(stash_cwd_helper.WIDTH, 2)\n"
    )
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    model, _ = call_user_factory("stash_cwd_pkg.nets:make", None, 10)
    assert model.in_features == 5
    assert sys.path == before


def test_model_code_hung_in_another_thread_holds_this_one_only_as_long_as_the_limit(tmp_path, monkeypatch):
    """A factory that hangs in a thread (no alarm runs there) held the lock for good: every later build
    waited forever, the main thread's included."""
    from stash_core.zoo.user import USER_CODE

    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "0.3")
    held = threading.Event()
    release = threading.Event()

    def hang() -> None:
        with USER_CODE:
            held.set()
            release.wait(30)

    hung = threading.Thread(target=hang)
    hung.start()
    try:
        held.wait(10)
        started = time.monotonic()
        with pytest.raises(UserModelError, match="another thread's model code has run past the time limit"):
            call_user_factory(f"{_model_file(tmp_path, 'quick', 0)}:make", None, 10)
        assert time.monotonic() - started < 5
    finally:
        release.set()
        hung.join(30)
