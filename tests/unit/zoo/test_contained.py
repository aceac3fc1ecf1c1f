"""A user's model file cannot change what a command prints or where it writes: its code runs in a child
process (zoo/contained.py) whose output goes to standard error, whose forks, threads, folder changes and
exits stay its own, and whose time limit the parent enforces."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from stash_core.cli.main import main

NET = "import torch.nn as nn\nNET = lambda n: nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, n))\n"
FILES = {
    "printing": NET + "print('hello from the file')\ndef make(num_classes=10):\n    print('\\x1b[2J built')\n    return NET(num_classes)\n",
    "forking": NET + "import os\ndef make(num_classes=10):\n    os.fork(); os.fork()\n    return NET(num_classes)\n",
    "threading": NET + "import threading, time\ndef make(num_classes=10):\n"
                 "    threading.Thread(target=lambda: time.sleep(10**6)).start()\n    return NET(num_classes)\n",
    "chdir": NET + "import os\ndef make(num_classes=10):\n    os.chdir('/')\n    return NET(num_classes)\n",
    "closing": NET + "import os, sys\ndef make(num_classes=10):\n    sys.stdout.close(); os.close(1)\n"
               "    return NET(num_classes)\n",
}  # fmt: skip


def _predict(folder: Path, name: str, *extra: str) -> list[str]:
    return ["predict", "--model", f"{folder}/{name}.py:make", "--batch-size", "4", "--input-shape", "3,32,32",
            "--instances", "p3.2xlarge", "--db", str(folder / "x.duckdb"), *extra]  # fmt: skip


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_json_answer_stays_whole_whatever_the_model_file_does(name, tmp_path, capsys, monkeypatch):
    (tmp_path / f"{name}.py").write_text(FILES[name])
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    assert main(_predict(tmp_path, name, "--format", "json")) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)  # exactly one JSON document: no print, no fork's copy
    assert len(answer["predictions"]) == 1
    assert Path.cwd() == tmp_path  # the file's chdir was its own
    assert time.monotonic() - started < 60  # a thread the file left running did not hold the command
    if name == "printing":
        assert "hello from the file" in captured.err and "\x1b" not in captured.err


def test_the_csv_lands_where_it_was_asked_even_when_the_file_changes_folder(tmp_path, capsys, monkeypatch):
    (tmp_path / "chdir.py").write_text(FILES["chdir"])
    monkeypatch.chdir(tmp_path)
    argv = ["recommend", "--model", f"{tmp_path}/chdir.py:make", "--batch-size", "4", "--input-shape", "3,32,32",
            "--epochs", "1", "--dataset-images", "100", "--budget-hours", "10", "--instances", "p3.2xlarge",
            "--db", str(tmp_path / "x.duckdb"), "--csv", "options.csv"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert (tmp_path / "options.csv").exists() and not Path("/options.csv").exists()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("def make(num_classes=10):\n    raise GeneratorExit('bye')\n", "raised GeneratorExit: bye"),
        ("def make(num_classes=10):\n    raise SystemExit(3)\n", "raised SystemExit"),
        # no message: no colon left dangling after the name
        ("def make(num_classes=10):\n    raise KeyboardInterrupt\n", "raised KeyboardInterrupt\n"),
        (
            "import os\ndef make(num_classes=10):\n    os.kill(os.getpid(), 9)\n",
            "ended its process (signal 9)",
        ),
    ],
)
def test_a_file_that_raises_exits_or_dies_is_one_line(body, says, tmp_path, capsys):
    (tmp_path / "bad.py").write_text(body)
    assert main(_predict(tmp_path, "bad")) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err and captured.err.count("\n") == 1


def test_a_file_that_ignores_the_alarm_is_stopped_at_the_limit(tmp_path, capsys, monkeypatch):
    (tmp_path / "slow.py").write_text(
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "def make(num_classes=10):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    time.sleep(600)\n"
    )
    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "1")
    earlier = set(_children())
    started = time.monotonic()
    assert main(_predict(tmp_path, "slow")) == 2
    assert time.monotonic() - started < 10
    assert "did not finish within 1 s" in capsys.readouterr().err
    assert not [pid for pid in set(_children()) - earlier if _is_zombie_free(pid)]  # the child was ended


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.append(int(entry.name))
    return found


def _is_zombie_free(pid: int) -> bool:
    """A child of this process that still runs (not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_in_the_dashboards_server_a_model_file_runs_in_a_new_interpreter(tmp_path, monkeypatch):
    """What pages/_shared.py turns on: os.abort in a factory ends only its own processes (this one goes on);
    a good file's counts and a factory's error come back as in-process ones would."""
    from stash_core import containment
    from stash_core.zoo import describe_model
    from stash_core.zoo.user_limits import UserModelError

    monkeypatch.setattr(containment, "ENABLED", False)
    monkeypatch.setattr(containment, "FRESH_PROCESS", True)
    (tmp_path / "good.py").write_text(FILES["printing"])
    (tmp_path / "aborts.py").write_text("import os\ndef make(num_classes=10):\n    os.abort()\n")
    (tmp_path / "raises.py").write_text(
        "def make(num_classes=10):\n    raise RuntimeError('no model today')\n"
    )
    info = describe_model(f"{tmp_path}/good.py:make", input_shape=(3, 32, 32))
    assert info.param_count == 3 * 32 * 32 * 10 + 10 and info.layer_count == 1  # its own 10 classes
    with pytest.raises(UserModelError, match="ended its process"):
        describe_model(f"{tmp_path}/aborts.py:make", input_shape=(3, 32, 32))
    with pytest.raises(Exception, match="no model today"):
        describe_model(f"{tmp_path}/raises.py:make", input_shape=(3, 32, 32))


def test_the_new_interpreter_does_not_import_a_json_py_of_the_current_folder(tmp_path, monkeypatch):
    from stash_core import containment
    from stash_core.zoo import describe_model

    monkeypatch.setattr(containment, "ENABLED", False)
    monkeypatch.setattr(containment, "FRESH_PROCESS", True)
    ran = tmp_path / "stray-ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    (tmp_path / "pickle.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    (tmp_path / "good.py").write_text(FILES["printing"])
    monkeypatch.chdir(tmp_path)
    info = describe_model(f"{tmp_path}/good.py:make", input_shape=(3, 32, 32))
    assert info.layer_count == 1 and not ran.exists()


def test_a_package_of_the_current_folder_is_found_and_stray_files_shadow_nothing(tmp_path, monkeypatch):
    """`package.module:FACTORY` in the current folder, as `python -m` found it before Stash's processes
    started without that folder on their path (-P); it goes last, so its json.py still does not run."""
    from stash_core import containment
    from stash_core.zoo import describe_model

    monkeypatch.setattr(containment, "ENABLED", False)
    monkeypatch.setattr(containment, "FRESH_PROCESS", True)
    ran = tmp_path / "stray-ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "models.py").write_text(FILES["printing"])
    monkeypatch.chdir(tmp_path)
    info = describe_model("mypkg.models:make", input_shape=(3, 32, 32))
    assert info.layer_count == 1 and not ran.exists()



def test_a_model_counted_in_the_child_finishes_after_the_parent_used_its_threads(tmp_path, monkeypatch):
    """The forked child trained the model on the parent's threads, which hangs once the parent has used them:
    a model counted on the CPU (it needs real tensors) timed out at the user-code limit."""
    import torch

    from stash_core import containment
    from stash_core.decide.predict.step_cost import step_cost

    model = tmp_path / "real_tensors.py"
    model.write_text(
        "import torch\nfrom torch import nn\n\n\ndef make(num_classes=10):\n"
        "    class M(nn.Module):\n"
        "        def __init__(self):\n"
        "            super().__init__()\n"
        "            self.fc = nn.Linear(3 * 8 * 8, 64)\n\n"
        "        def forward(self, x):\n"
        "            x = torch.flatten(x, 1)\n"
        "            return self.fc(-x if x.sum().item() < 0 else x)  # real tensors only\n\n"
        "    return M()\n"
    )
    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "10")
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    containment.enable()
    a = torch.randn(1500, 1500)
    (a @ a).sum()  # the parent's threads in use
    started = time.monotonic()
    assert step_cost(f"{model}:make", 64, (3, 8, 8)).note == "counted on the CPU at batch 1, scaled"
    assert time.monotonic() - started < 10
