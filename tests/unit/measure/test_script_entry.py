"""The entry point that runs a user's script unmodified, as one process (as R0 does): what it measures, when
it stops, and one clear error line, with the script's last stderr lines, for each way a script goes wrong."""

from __future__ import annotations

import atexit
import functools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from forked import ForkServer

from stash_core.measure import protocol

pytestmark = pytest.mark.launches  # every test here starts real measuring processes

REPO = Path(__file__).resolve().parents[3]

# Tuple batches from a custom collate_fn, AdamW, clip_grad_norm_, an LR scheduler and bf16 autocast on CPU.
FEATURES = """
import sys, torch
from torch.utils.data import DataLoader, TensorDataset

def collate(samples):
    xs, ys = zip(*samples)
    return torch.stack(xs), torch.stack(ys)

data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
loader = DataLoader(data, batch_size=int(sys.argv[1]), collate_fn=collate, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5)
for epoch in range(1000):
    for inputs, targets in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
open(sys.argv[2], "w").write("the script ran to its end")
"""

NO_LOADER = """
import torch
x, y = torch.randn(64, 4), torch.randn(64, 1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(25):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""

# Reads its files through forked DataLoader workers, and notes their page-cache residency after each epoch.
COLD = """
import json, os, sys, torch
from pathlib import Path
from torch.utils.data import DataLoader, Dataset
from stash_core.data.pagecache import resident_fraction

files = sorted(Path(sys.argv[1]).glob("*.bin"))

class Files(Dataset):
    def __len__(self):
        return len(files)
    def __getitem__(self, index):
        return torch.tensor([float(len(files[index].read_bytes()))])

loader = DataLoader(Files(), batch_size=4, num_workers=2, persistent_workers=True)
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-9)
after_epochs = []
for epoch in range(5):
    for batch in loader:
        model(batch).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    after_epochs.append(resident_fraction(files))
Path(sys.argv[2]).write_text(json.dumps(after_epochs))
"""

# A sanity pass over a validation loader (no workers) before training from a loader with one worker.
SANITY_FIRST = """
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
check = DataLoader(data, batch_size=8)
train = DataLoader(data, batch_size=8, num_workers=1, persistent_workers=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with torch.no_grad():
    for inputs, targets in check:
        model(inputs)
for epoch in range(50):
    for inputs, targets in train:
        ((model(inputs) - targets) ** 2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
"""

# An IterableDataset read by one worker: synthetic runs replay its first batches after its workers end.
ITERABLE = """
import torch
from torch.utils.data import DataLoader, IterableDataset

class Stream(IterableDataset):
    def __iter__(self):
        for _ in range(64):
            yield torch.randn(4), torch.randn(1)

loader = DataLoader(Stream(), batch_size=8, num_workers=1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(50):
    for inputs, targets in loader:
        ((model(inputs) - targets) ** 2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
"""

STEP = """
import torch
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
def step():
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


# What the entry point imports before it runs the script: imported once, then a process forked per run (a new
# interpreter spent some 3 CPU-s importing them for each of these tests). Not the compiler: a test below
# checks that only a script that compiles imports it.
_ENTRY_IMPORTS = [
    "torch", "torch.distributed", "stash_core.measure.protocol", "stash_core.measure.script_cache",
    "stash_core.measure.script_hooks", "stash_core.measure.script_stop", "stash_core.measure.worker_job",
    "stash_core.terminal", "stash_core.zoo.compiler_guards",
]  # fmt: skip


@functools.cache
def _entry_server() -> ForkServer:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(name, None)
    server = ForkServer(_ENTRY_IMPORTS, env=env)
    atexit.register(server.close)
    return server


def run_entry(
    tmp_path: Path, source: str | None, args: list[str] = (), timeout_s: float = 60, **job
) -> tuple:
    """Run the entry point on `source` (None: no script file); (exit status, {kind: payload}, stderr)."""
    script = tmp_path / "train.py"
    if source is not None:
        script.write_text(textwrap.dedent(source))
    job = {
        "phase": "R0", "script": str(script), "script_args": list(args), "data": "synthetic",
        "data_dir": None, "device": "cpu", "iterations": None, "target_relative_ci": 0.02,
        "max_iterations": 2000, "max_phase_s": 30.0, "start_timeout_s": 30.0, "seed": 0, **job,
    }  # fmt: skip
    done = _entry_server().run(
        "-m stash_core.measure.script_entry", "--job-json", json.dumps(job), cwd=tmp_path, timeout=timeout_s
    )
    messages = {}
    for line in done.stdout.splitlines():
        parsed = protocol.parse(line, job.get(protocol.TOKEN_KEY))
        if parsed:
            messages[parsed[0]] = parsed[1]
    return done.returncode, messages, done.stderr


def test_tuple_batches_collate_clipping_scheduler_and_autocast_stop_at_the_iteration_target(tmp_path) -> None:
    marker = tmp_path / "ended.txt"
    status, messages, stderr = run_entry(tmp_path, FEATURES, ["8", str(marker)], iterations=15)
    assert status == 0, stderr
    result = messages["RESULT"]
    assert result["stop_reason"] == "fixed"
    assert len(result["samples"]["iteration_s"]) == 15
    assert result["script"]["batch_size"] == 8 and result["script"]["loader_used"]
    assert result["script"]["loader_workers"] == 0  # the script's DataLoader loads in its own process
    assert result["script"]["split"].startswith("data wait, forward")
    samples = result["samples"]
    for index, total_s in enumerate(samples["iteration_s"]):  # the parts of the step add up to it
        parts_s = [samples[part][index] for part in ("data_s", "forward_s", "backward_s", "optimizer_s")]
        assert min(parts_s[:2]) > 0 and abs(sum(parts_s) - total_s) < 1e-9
    assert not marker.exists()  # stopped at the step: the code after the loop never ran


def test_a_script_without_a_dataloader_gets_its_iteration_time_and_no_loader(tmp_path) -> None:
    status, messages, stderr = run_entry(tmp_path, NO_LOADER)
    assert status == 0, stderr
    result = messages["RESULT"]
    assert result["stop_reason"] == "script_ended"  # 25 steps: it ended before the target
    assert result["warmup_iterations"] + len(result["samples"]["iteration_s"]) == 24
    assert result["script"] == {**result["script"], "loader_used": False, "batch_size": None}


# Steps 25 times, then notes whether torch's compiler was imported (its modules loaded) in this process.
COMPILER_NOTE = """
import sys, torch
from pathlib import Path
model = torch.nn.Linear(4, 1)
if sys.argv[2] == "compile":
    model = torch.compile(model, backend="eager")
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
x = torch.randn(64, 4)
for step in range(25):
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
loaded = any(name.startswith("torch._dynamo.") for name in sys.modules)
Path(sys.argv[1]).write_text("compiler loaded" if loaded else "compiler not loaded")
"""


@pytest.mark.parametrize(("mode", "note"), [("eager", "compiler not loaded"), ("compile", "compiler loaded")])
def test_on_the_cpu_the_compiler_is_imported_only_by_a_script_that_compiles(tmp_path, mode, note) -> None:
    noted = tmp_path / "note.txt"
    # torch.compile's first step imports the compiler: on a loaded 2-core machine past the 30 s others allow
    status, messages, stderr = run_entry(tmp_path, COMPILER_NOTE, [str(noted), mode], timeout_s=180,
                                         start_timeout_s=120.0)  # fmt: skip
    assert status == 0, (stderr, messages.get("ERROR"))
    assert messages["RESULT"]["stop_reason"] == "script_ended"
    assert noted.read_text() == note


@pytest.mark.parametrize(
    ("case", "source", "says"),
    [
        ("missing", None, "cannot read the script"),
        ("does not parse", "def broken(:\n", "does not parse"),
        ("raises first", STEP + "import sys\nprint('loading config', file=sys.stderr)\nraise ValueError('no"
         " config')\n", "raised ValueError: no config at train.py line 11 (before its first optimizer step)"),
        # where in the script, and Stash's count apart from the script's message (it read as its end)
        ("raises later", STEP + "for _ in range(4):\n    step()\nraise RuntimeError('boom')\n",
         "raised RuntimeError: boom at train.py line 11 (after 4 optimizer steps)"),
        ("never steps", "print('hello')\n", "ended without an optimizer step"),
        ("exits non-zero", STEP + "step()\nstep()\nraise SystemExit(3)\n", "exited with status 3"),
        # argparse says why on stderr, then exits 2: the reason ends the line (it was only in the file)
        ("bad arguments",
         "import argparse\nargparse.ArgumentParser(prog='train.py').parse_args(['--bogus'])\n",
         "exited with status 2 before its first optimizer step: train.py: error: unrecognized arguments: "
         "--bogus"),
        # sys.exit("text") is status 1 with the text (it was reported as "status text")
        ("exits with a message", "import sys\nsys.exit('no data folder')\n",
         "exited with status 1 before its first optimizer step: no data folder"),
        # its last words (a print, on stdout) say where it waits: they were nowhere, on screen or in the file
        ("hangs", "import sys, time\nprint('got here', file=sys.stderr)\n"
         "print('waiting for the NFS server...')\ntime.sleep(60)\n", "no optimizer step within 2 s"),
    ],
)  # fmt: skip
def test_a_failing_script_is_one_error_line_with_its_last_stderr_lines(tmp_path, case, source, says) -> None:
    # Only the hanging script waits for the start timeout; the others end on their own, so their start may
    # take as long as Python and torch need to import on a loaded machine.
    start_timeout_s = 2.0 if case == "hangs" else 30.0
    status, messages, _ = run_entry(tmp_path, source, start_timeout_s=start_timeout_s, timeout_s=40)
    assert status != 0 and "RESULT" not in messages
    error = messages["ERROR"]
    assert says in error["message"] and "\n" not in error["message"]
    assert error["message"].startswith("rank 0 (")
    if case == "raises first":
        assert "loading config" in error["stderr_tail"]
        assert any("ValueError: no config" in line for line in error["stderr_tail"])
        # the script's traceback as Python prints it, from its own file: not the frames of Stash that ran it
        assert any('train.py", line' in line for line in error["stderr_tail"])
        assert not any("script_entry.py" in line for line in error["stderr_tail"])
    if case == "exits with a message":  # written to stderr as Python writes it, so kept with the rest
        assert error["stderr_tail"][-1:] == ["no data folder"]
    if case == "hangs":
        assert error["message"].endswith('; its last output: "waiting for the NFS server..."')
        assert error["stdout_tail"] == ["waiting for the NFS server..."]
        assert error["stderr_tail"] == ["got here"]


def test_a_cold_run_evicts_each_file_the_scripts_loader_workers_read(tmp_path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    for index in range(24):
        with open(root / f"{index:02}.bin", "wb") as handle:
            handle.write(os.urandom(64 * 1024))
            os.fsync(handle.fileno())  # clean pages, so they can be evicted
    seen = tmp_path / "resident.json"
    status, messages, stderr = run_entry(
        tmp_path, COLD, [str(root), str(seen)], data="cold", data_dir=str(root)
    )
    assert status == 0, stderr
    # Read whole after each epoch, the files would be resident until the once-a-second sweep came by.
    assert max(json.loads(seen.read_text())) < 0.05
    assert messages["RESULT"]["script"]["loader_workers"] == 2  # as the script made its DataLoader


def test_the_loader_workers_are_those_of_the_loader_the_steps_read(tmp_path) -> None:
    """A validation pass read before the first step does not stand for the training loader, and a replayed
    IterableDataset's loader (its workers ended after its first batches) keeps its own count."""
    for source in (SANITY_FIRST, ITERABLE):
        status, messages, stderr = run_entry(tmp_path, source, iterations=10)
        assert status == 0, stderr
        assert messages["RESULT"]["script"]["loader_workers"] == 1, source


@pytest.mark.parametrize(("job", "steps"), [({"iterations": 2}, 1 + 2 + 2), ({"max_iterations": 3}, 1 + 3)])
def test_a_small_fixed_count_or_cap_stops_the_script_there(tmp_path, job, steps) -> None:
    # The first check came after 10 iterations whatever was asked: --iterations 2 timed 8 (of slow steps).
    source = STEP + "for _ in range(1000):\n    step()\n"
    status, messages, stderr = run_entry(tmp_path, source, **job)
    assert status == 0, stderr
    assert messages["RESULT"]["script"]["optimizer_steps"] == steps  # the first step starts the clock


def test_a_script_that_stops_stepping_past_the_runs_time_is_stopped_with_where(tmp_path) -> None:
    # It was stopped only by the launch's time limit, minutes later, saying no more than that.
    source = STEP + "import time\nfor i in range(100000):\n    step()\n    if i == 3:\n"
    source += "        time.sleep(600)\n"
    started = time.monotonic()
    status, messages, _ = run_entry(tmp_path, source, max_phase_s=1.0, timeout_s=120, stall_grace_s=2.0)
    assert status != 0 and "RESULT" not in messages
    assert "no optimizer step for " in messages["ERROR"]["message"]
    assert "after step 4, over 2 s past this launch's 1 s of timing" in messages["ERROR"]["message"]
    assert time.monotonic() - started < 60


def test_the_cached_run_counts_the_files_the_script_opens_under_its_data_folder(tmp_path) -> None:
    """A --data-dir the script never reads (it reads elsewhere) is told from one it reads."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.bin").write_bytes(b"x" * 1024)
    elsewhere = tmp_path / "other.bin"
    elsewhere.write_bytes(b"y" * 1024)
    reads = STEP + "import sys\nfor _ in range(30):\n    step()\n    open(sys.argv[1], 'rb').read()\n"
    opens = {}
    for name, path in (("reads it", root / "a.bin"), ("reads elsewhere", elsewhere)):
        status, messages, stderr = run_entry(
            tmp_path, reads, [str(path)], data="cached", data_dir=str(root), iterations=5
        )  # fmt: skip
        assert status == 0, stderr
        opens[name] = messages["RESULT"]["script"]["data_dir_opens"]
    assert opens["reads it"] > 0 and opens["reads elsewhere"] == 0, opens


def test_the_script_sees_its_own_folder_not_the_cwd_and_not_stashs_safe_path(tmp_path) -> None:
    """Started as torchrun starts it, with Stash's PYTHONSAFEPATH and Stash's folder first on PYTHONPATH,
    from a folder holding a json.py: the standard json is imported, the script's sibling module is, its own
    package `app` on the user's PYTHONPATH is (Stash's app.py hid it), and its environment is its own."""
    (tmp_path / "json.py").write_text("raise SystemExit('the json.py of the current folder ran')\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "helper.py").write_text("ANSWER = 42\n")
    (tmp_path / "lib" / "app").mkdir(parents=True)
    (tmp_path / "lib" / "app" / "__init__.py").write_text("")
    (tmp_path / "lib" / "app" / "settings.py").write_text("LR = 0.05\n")
    seen = tmp_path / "seen.txt"
    script = project / "train.py"
    script.write_text(
        "import os, helper\nfrom app.settings import LR\n"
        f"open({str(seen)!r}, 'w')"
        ".write(f\"{helper.ANSWER} {os.environ.get('PYTHONSAFEPATH')} {LR}\")\n"
        + textwrap.dedent(NO_LOADER)
    )
    job = {
        "phase": "R0", "script": str(script), "script_args": [], "data": "synthetic", "data_dir": None,
        "device": "cpu", "iterations": None, "target_relative_ci": 0.02, "max_iterations": 2000,
        "max_phase_s": 30.0, "start_timeout_s": 30.0, "seed": 0,
    }  # fmt: skip
    user_path = os.pathsep.join([str(REPO), str(tmp_path / "lib")])  # as worker_env makes it: Stash's first
    env = {**os.environ, "PYTHONPATH": user_path, "OMP_NUM_THREADS": "1", "PYTHONSAFEPATH": "stash"}
    done = subprocess.run(
        [sys.executable, "-u", "-m", "stash_core.measure.script_entry", "--job-json", json.dumps(job)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert seen.read_text() == "42 None 0.05"


def test_a_script_that_spawns_its_own_workers_is_told_so_at_once(tmp_path) -> None:
    """Its children would train where Stash cannot time them while this process waited for a first step
    until the start timeout ("hangs before its first step"); its `except Exception` does not hide it."""
    source = (
        "import torch.multiprocessing as mp\n"
        "def train(rank):\n    pass\n"
        "if __name__ == '__main__':\n"
        "    try:\n        mp.spawn(train, nprocs=2)\n    except Exception:\n        pass\n"
    )
    started = time.monotonic()
    status, messages, _ = run_entry(tmp_path, source, start_timeout_s=60.0, timeout_s=90)
    assert status != 0 and "RESULT" not in messages
    message = messages["ERROR"]["message"]
    assert "starts its own worker processes (torch.multiprocessing.spawn)" in message and "\n" not in message
    assert time.monotonic() - started < 50  # not the start timeout


def test_the_stderr_tail_stays_small_however_much_progress_the_script_writes() -> None:
    """A progress line redrawn with "\\r" each step grew one partial line without end, copied and split
    again at every write: each step slower than the last, and the whole output kept as one tail line."""
    import io

    from stash_core.measure import output_tail
    from stash_core.measure.output_tail import TAIL_LINES, OutputTail

    tail = OutputTail(io.StringIO())
    tail.write("loading data\n")
    for step in range(40_000):
        tail.write(f"\rstep {step}/40000 loss=0.1234")
    assert tail.tail() == ["loading data", "step 39999/40000 loss=0.1234"]  # as a terminal shows it
    assert len(tail.partial) < 100
    tail.write("\nTraceback (most recent call last):\nValueError: bad batch\n")
    assert tail.tail() == ["loading data", "step 39999/40000 loss=0.1234", "Traceback (most recent call "
                           "last):", "ValueError: bad batch"]  # fmt: skip
    for _ in range(10_000):
        tail.write("x" * 100)  # a line that never ends: only its end is kept
    kept_chars = getattr(output_tail, "TAIL_LINE_CHARS", None)
    assert kept_chars is not None and tail.tail()[-1] == "x" * kept_chars
    tail.write("".join(f"line {n}\n" for n in range(100)))
    assert tail.tail()[-1] == "line 99" and len(tail.tail()) == TAIL_LINES


def test_a_script_that_ends_within_the_warm_up_fails_with_one_line_and_no_nan(tmp_path) -> None:
    # 3 steps are 2 iterations, both warm-up: the run "completed" with 0 iterations kept and NaN times.
    status, messages, _ = run_entry(tmp_path, STEP + "for _ in range(3):\n    step()\n")
    assert status != 0 and "RESULT" not in messages
    message = messages["ERROR"]["message"]
    # the warm-up said as it is, not as the steps made ("(1 iterations; ...)" after 2 steps)
    said = ("ended after 3 optimizer steps, all of them warm-up (the first step, which starts the clock, and "
            "at least the 2 iterations after it): no iteration is left to time")
    assert said in message
    assert "more steps" in message and "\n" not in message


# A loop of 30 steps with a loader worker (forked: it ends with os._exit too), then os._exit(status).
OS_EXIT = """
import os, sys, torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(240, 2)), batch_size=8, num_workers=1)
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for (inputs,) in loader:
    model(inputs).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
print("bye", file=sys.stderr, flush=True)
os._exit(int(sys.argv[1]))
"""


def test_a_script_leaving_through_os_exit_with_a_status_says_so_with_its_last_stderr_line(tmp_path) -> None:
    # os._exit skipped Stash's report: the launcher said only "rank 0 exited with code 4", and no stderr tail.
    status, messages, _ = run_entry(tmp_path, OS_EXIT, args=["4"])
    assert status == 4 and "RESULT" not in messages
    said = "the script exited with status 4 after 30 optimizer steps: bye"
    assert messages["ERROR"]["message"].endswith(said)
    assert messages["ERROR"]["stderr_tail"][-1] == "bye"


def test_a_script_that_leaves_through_os_exit_0_has_ended_by_itself(tmp_path) -> None:
    # It said "the run exited without a result" after 30 timed steps; its loader worker's own os._exit
    # reports nothing.
    status, messages, stderr = run_entry(tmp_path, OS_EXIT, args=["0"])
    assert status == 0 and "ERROR" not in messages, stderr
    result = messages["RESULT"]
    assert result["stop_reason"] == "script_ended" and result["script"]["optimizer_steps"] == 30
    assert result["script"]["loader_workers"] == 1 and result["samples"]["iteration_s"]


def test_a_script_stopped_by_stash_leaving_through_os_exit_in_its_finally_keeps_its_result(tmp_path) -> None:
    source = STEP + "import os\ntry:\n    for _ in range(1000):\n        step()\nfinally:\n    os._exit(0)\n"
    status, messages, stderr = run_entry(tmp_path, source, iterations=2)
    assert status == 0 and "ERROR" not in messages, stderr
    assert messages["RESULT"]["stop_reason"] == "fixed"


def test_a_line_the_script_prints_like_a_message_is_its_output_not_a_message(tmp_path) -> None:
    """print("STASH-ERROR ...") in a user's script failed the run with the script's text as its error."""
    source = 'print(\'STASH-ERROR "fake error from the script"\', flush=True)\n' + textwrap.dedent(NO_LOADER)
    token = protocol.new_token()
    status, messages, stderr = run_entry(tmp_path, source, iterations=5, protocol_token=token)
    assert status == 0, stderr
    assert "ERROR" not in messages and messages["RESULT"]["stop_reason"]


# A map-style dataset that notes every read, through a loader whose workers end with each epoch.
COUNTED_READS = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset

class Counted(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, index):
        with open(sys.argv[1], "a") as reads:
            reads.write(f"{index}\\n")
        return torch.randn(4), torch.randn(1)

loader = DataLoader(Counted(), batch_size=4, num_workers=2, shuffle=True)  # workers new every epoch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(100):
    for inputs, targets in loader:
        ((model(inputs) - targets) ** 2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_synthetic_run_reads_its_replayed_samples_once_though_the_loaders_workers_end_each_epoch(tmp_path):
    """Each epoch's new loader workers filled the replay again: a synthetic run read real data every epoch
    (more samples than it trained on), its loading counted as compute."""
    reads = tmp_path / "reads.txt"
    status, messages, stderr = run_entry(tmp_path, COUNTED_READS, [str(reads)], iterations=40)
    assert status == 0, stderr
    steps = messages["RESULT"]["warmup_iterations"] + 40  # more than the 16 steps of an epoch
    assert steps > 16 and len(reads.read_text().split()) <= 8 * 4  # eight batches' worth, read once


def test_the_scripts_output_tail_and_its_own_stdout_hold_none_of_stashs_lines(tmp_path) -> None:
    """Stash's progress lines went through the script's sys.stdout: into its output's tail, and into a file
    the script had made its stdout (lost to the launcher)."""
    source = STEP + (
        "import sys\nprint('epoch 1')\nsys.stdout = open('log.txt', 'w')\nprint('to the log')\n"
        "for _ in range(25):\n    step()\nraise RuntimeError('late')\n"
    )
    status, messages, _ = run_entry(tmp_path, source)
    assert status != 0 and "PROGRESS" in messages
    assert messages["ERROR"]["stdout_tail"] == ["epoch 1"]
    assert (tmp_path / "log.txt").read_text() == "to the log\n"
