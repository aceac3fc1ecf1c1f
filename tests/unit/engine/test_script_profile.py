"""`stash profile --script`, end to end on CPU: the user's own training script, unmodified, in every run of
the differential method, with the breakdown adding up to the realistic iteration time."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
from support import stash_main

pytestmark = pytest.mark.launches  # every test here starts real measuring processes

# A plain loop: dict batches from files under a data folder, each sample costing real CPU work.
PLAIN = """
import atexit, json, os, sys, time, torch
from pathlib import Path
from torch.utils.data import DataLoader, Dataset

SPENT = {"seconds": 0.0, "samples": 0}  # what the pre-processing cost in this very run, written at exit
atexit.register(lambda: Path(f"cost-{os.getpid()}.json").write_text(json.dumps(SPENT)))

def work(raw):  # the per-sample pre-processing
    total = 0
    for _ in range(ROUNDS):
        total = (total * 31 + sum(raw)) % 1_000_003
    return total

class Files(Dataset):
    def __init__(self, root):
        self.files = sorted(Path(root).glob("*.bin"))
    def __len__(self):
        return len(self.files)
    def __getitem__(self, index):
        raw = self.files[index].read_bytes()
        start = time.perf_counter()
        value = work(raw)
        SPENT["seconds"] += time.perf_counter() - start
        SPENT["samples"] += 1
        return {"x": torch.full((16,), float(value % 7)), "y": torch.tensor(index % 4)}

if __name__ == "__main__":
    loader = DataLoader(Files(sys.argv[1]), batch_size=BATCH, num_workers=0, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(100):
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""
ROUNDS, BATCH = 400, 8

# DDP set up by the script from torchrun's environment; it iterates tensors itself (no DataLoader).
DDP = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                                    torch.nn.Linear(1024, 256)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 256)
for step in range(100_000):
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
"""

FAST = ["--iterations", "40", "--max-phase-seconds", "20", "--progress", "none", "--no-store",
        "--device", "cpu"]  # fmt: skip


def profile(tmp_path: Path, source: str, *args: str) -> tuple[dict, str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "result.json"
    # main() in this process (the script's processes are real): no interpreter and imports to start first
    done = stash_main("profile", "--script", str(script), "--out", str(out), *FAST, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(out.read_text()), done.stdout


def check_identity(breakdown: dict) -> None:
    named = sum(entry["seconds"] or 0.0 for entry in breakdown["stalls"].values())
    assert math.isclose(named + breakdown["unattributed_s"], breakdown["iteration_s"], rel_tol=1e-9)


def sample_cost_s(folder: Path) -> float:
    """What one sample cost in the real-data run: the script's own timing of its pre-processing, in the run
    that pre-processed the most samples (the synthetic run only reads the batches it replays)."""
    runs = [json.loads(path.read_text()) for path in folder.glob("cost-*.json")]
    spent = max(runs, key=lambda run: run["samples"])
    return spent["seconds"] / spent["samples"]


@pytest.mark.quiet
def test_a_plain_loop_with_a_costly_dataset_gives_a_cpu_stall_of_that_cost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for index in range(64):
        (data / f"{index:03}.bin").write_bytes(bytes(range(256)) * 4)
    source = PLAIN.replace("ROUNDS", str(ROUNDS)).replace("BATCH", str(BATCH))
    args = ["--data-dir", str(data), "--stalls", "compute,cpu", "--", str(data)]
    doc, stdout = profile(tmp_path, source, *args)
    cost_s = sample_cost_s(tmp_path)
    assert [phase["name"] for phase in doc["phases"]] == ["R0", "R3"]
    assert doc["spec"]["batch_size"] == BATCH and doc["model"]["kind"] == "script"
    assert doc["spec"]["loader_workers"] == 0  # the script's own num_workers, not Stash's default of 2
    assert doc["spec"]["script_args"] == [str(data)] and len(doc["spec"]["script_sha256"]) == 64
    breakdown = doc["breakdown"]
    check_identity(breakdown)
    cpu_s = breakdown["stalls"]["cpu"]["seconds"]
    # An epoch as the script's DataLoader gives it: 64 files in batches of 8, a step per batch
    assert breakdown["iterations_per_epoch"] == 64 // BATCH
    assert math.isclose(breakdown["stalls"]["cpu"]["epoch_s"], cpu_s * (64 // BATCH), rel_tol=1e-9)
    # No loader workers: the step waits for the whole batch's pre-processing (with workers, it would wait for
    # a batch's cost over the workers minus the step, when the machine has the cores).
    expected_s = BATCH * cost_s
    assert 0.7 * expected_s < cpu_s < 1.4 * expected_s, (cpu_s, expected_s)
    r3 = next(phase for phase in doc["phases"] if phase["name"] == "R3")
    assert r3["parts_mean_s"]["data_s"] > 0.5 * cpu_s  # the stall is time spent waiting in the loader
    assert r3["script"]["data_dir_opens"] > 0
    assert not any("opened no file" in warning for warning in breakdown["warnings"])
    assert "CPU prep" in stdout


def test_a_ddp_script_that_ends_by_itself_and_destroys_its_group_completes(tmp_path: Path) -> None:
    """examples/scripts/train_ddp.py -- --steps 25: the script destroys its process group and returns, its
    DDP model freed after; gloo's group was destructed then, holding the GIL while it joined a thread that
    waited for the GIL, and a run hung every few launches until its time limit failed the profile. One
    round (--launches 1: three launches, two of 2 ranks) keeps the test's CPU to a third of the rounds the
    target would ask for; other tests launch this script too (tests/unit/campaign/test_script_campaign.py)."""
    from support import REPO

    script = str(REPO / "examples" / "scripts" / "train_ddp.py")
    done = stash_main("profile", "--script", script, "--workers", "2", "--no-probes", "--no-store",
                      "--max-phase-seconds", "5", "--launches", "1", "--progress", "none",
                      "--out", str(tmp_path / "result.json"), "--", "--steps", "25",
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads((tmp_path / "result.json").read_text())
    assert [phase["status"] for phase in doc["phases"]] == ["completed"] * 3
    assert "the script ended by itself" in done.stdout
    assert "went on stepping" not in done.stdout  # it ends its group after its loop, as it should


def test_a_script_that_ends_its_group_and_trains_on_is_warned_of(tmp_path: Path) -> None:
    """Its later steps communicate nothing and its ranks cannot be gathered; the profile said nothing."""
    source = """
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    net = torch.nn.Linear(16, 4)
    model = torch.nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    for step in range(10**9):
        (model if step < 20 else net)(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if step == 19:
            dist.destroy_process_group()
    """
    doc, _ = profile(tmp_path, source, "--workers", "2", "--stalls", "compute,interconnect",
                     "--max-phase-seconds", "6")  # fmt: skip
    [warning] = [w for w in doc["breakdown"]["warnings"] if "went on stepping" in w]
    assert "(R1 after 20 steps)" in warning and "destroy_process_group" in warning


def test_a_script_that_catches_every_exception_is_still_stopped(tmp_path: Path) -> None:
    """A loop under a bare `except: continue` caught the StopScript Stash raises from the optimizer step and
    trained on: each run failed at its time limit ("run did not finish within 212 s")."""
    source = """
    import torch
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    for step in range(10**9):
        try:
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        except:  # noqa: E722 - the habit under test
            continue
    """
    doc, _ = profile(tmp_path, source, "--workers", "1", "--stalls", "compute", "--max-phase-seconds", "8")
    assert [phase["status"] for phase in doc["phases"]] == ["completed"] * len(doc["phases"])
    assert doc["breakdown"]["stalls"]["compute"]["seconds"] is not None


@pytest.mark.quiet
def test_a_ddp_script_with_two_workers_gives_an_interconnect_stall(tmp_path: Path) -> None:
    doc, _ = profile(tmp_path, DDP, "--workers", "2", "--no-probes")
    assert [phase["name"] for phase in doc["phases"]] == ["R0", "R1", "R2"]
    assert doc["phases"][1]["workers"] == 2
    breakdown = doc["breakdown"]
    check_identity(breakdown)
    interconnect = breakdown["stalls"]["interconnect"]
    assert interconnect["status"] == "measured" and interconnect["seconds"] > 0
    # The module passed to DDP is hooked through the DDP wrapper: forward and backward are split.
    assert all(phase["parts_mean_s"]["forward_s"] > 0 for phase in doc["phases"])
    assert doc["spec"]["loader_workers"] is None  # no DataLoader, so no loader workers to record
    # No DataLoader: CPU and disk are marked, not guessed.
    for name in ("cpu", "disk"):
        assert breakdown["stalls"][name]["status"] == "not_separable"
        assert "no torch DataLoader" in breakdown["stalls"][name]["note"]


def test_a_script_that_fails_names_the_run_and_keeps_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('reading cfg.yaml', file=sys.stderr)\nraise KeyError('lr')\n")
    out = tmp_path / "result.json"
    done = stash_main("profile", "--script", str(script), "--out", str(out), *FAST, cwd=tmp_path)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("stash: run")]
    assert len(lines) == 1 and "run R0" in lines[0] and "raised KeyError" in lines[0], done.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and "reading cfg.yaml" in doc["phases"][0]["stderr_tail"]


def test_a_script_that_steps_no_optimizer_is_told_so_at_once(tmp_path: Path) -> None:
    """Weights updated by hand failed after the 120 s start timeout as "the script hangs before its first
    step"."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(8, 2)
        while True:
            model.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
    """))
    out = tmp_path / "r.json"
    done = stash_main("profile", "--script", str(script), "--out", str(out), *FAST, cwd=tmp_path)
    assert done.returncode == 1
    assert "backward passes without a torch.optim optimizer's step()" in done.stderr, done.stderr
    assert "hangs" not in done.stderr


# A dataset that works only inside its loader's workers (as one that opens an HDF5 or LMDB file in each).
WORKER_ONLY = """
import sys, torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

class Shards(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, index):
        assert get_worker_info() is not None, "dataset used outside a DataLoader worker"
        return torch.full((16,), float(index % 7)), torch.tensor(index % 4)

loader = DataLoader(Shards(), batch_size=8, num_workers=int(sys.argv[1]))
model = torch.nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(1000):
    for x, y in loader:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_dataset_that_works_only_in_its_loaders_workers_is_replayed_by_them_with_a_warning(
    tmp_path: Path,
) -> None:
    doc, _ = profile(tmp_path, WORKER_ONLY, "--stalls", "compute", "--", "2")
    assert [phase["name"] for phase in doc["phases"]] == ["R0"] and doc["status"] == "completed"
    said = [w for w in doc["breakdown"]["warnings"] if "could not be read outside its loader's workers" in w]
    assert len(said) == 1 and said[0].startswith("R0: the script's dataset (Shards)"), doc["breakdown"]
    assert "(AssertionError: dataset used outside a DataLoader worker)" in said[0]
    # Without workers the script reads in its own process: the error is the script's, as it would be alone.
    out = tmp_path / "alone.json"
    script = str(tmp_path / "train.py")
    done = stash_main("profile", "--script", script, "--out", str(out), *FAST, "--", "0", cwd=tmp_path)
    assert done.returncode == 1 and "the script raised AssertionError: dataset used outside" in done.stderr
