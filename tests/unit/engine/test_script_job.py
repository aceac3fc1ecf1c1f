"""What a script's runs found goes into its result: its batch size, threads and loader workers."""

import pytest

from stash_core.engine.script_job import finish_script_doc


def doc_of(*found: dict) -> dict:
    phases = [{"name": f"R{i}", "status": "completed", "script": info} for i, info in enumerate(found)]
    return {"spec": {"batch_size": None, "loader_workers": 2, "data_dir": "/data"}, "phases": phases,
            "breakdown": None}  # fmt: skip


def test_the_spec_keeps_the_loader_workers_the_script_ran_not_the_default() -> None:
    doc = doc_of(*[{"loader_used": True, "batch_size": 32, "loader_workers": 6, "threads": 4}] * 2)
    finish_script_doc(doc)
    assert doc["spec"]["loader_workers"] == 6 and doc["spec"]["batch_size"] == 32


def test_runs_that_disagree_or_use_no_loader_leave_the_loader_workers_unknown() -> None:
    disagree = doc_of({"loader_used": True, "loader_workers": 4}, {"loader_used": True, "loader_workers": 0})
    no_loader = doc_of({"loader_used": False, "loader_workers": None})
    for doc in (disagree, no_loader):
        finish_script_doc(doc)
        assert doc["spec"]["loader_workers"] is None


def test_a_given_batch_size_the_runs_contradict_gives_way_to_the_measured_one_with_a_warning() -> None:
    doc = doc_of(*[{"loader_used": True, "batch_size": 8, "loader_workers": 1}] * 2)
    doc["spec"]["batch_size"], doc["breakdown"] = 4, {"warnings": [], "stalls": {}}
    finish_script_doc(doc)
    assert doc["spec"]["batch_size"] == 8
    assert any("--batch-size 4 was given" in warning and "batches of 8" in warning
               for warning in doc["breakdown"]["warnings"])  # fmt: skip
    unseen = doc_of({"loader_used": False, "loader_workers": None})  # no DataLoader: the given batch stands
    unseen["spec"]["batch_size"] = 4
    finish_script_doc(unseen)
    assert unseen["spec"]["batch_size"] == 4


def _apart_doc(process_group: bool) -> dict:
    """A script's R0 (one worker) and R1 (two), R1 faster beyond the noise (two processes, no talk)."""
    script = {"process_group": process_group, "threads": 1, "batch_size": 16}
    phases = [
        {"name": "R0", "status": "completed", "workers": 1, "iteration_s": {"mean": 0.00085, "ci95": 0.00006},
         "script": script},
        {"name": "R1", "status": "completed", "workers": 2, "iteration_s": {"mean": 0.00061, "ci95": 0.00005},
         "script": script},
    ]  # fmt: skip
    return {"phases": phases, "spec": {}}


def test_workers_that_set_up_no_process_group_have_no_communication_stall_and_blame_no_load() -> None:
    from stash_core.engine.profiler import breakdown_of_completed
    from stash_core.spec import ProfileSpec

    spec = ProfileSpec(model="script", script="train.py", batch_size=16, workers_per_node=2, device="cpu")
    result = breakdown_of_completed(_apart_doc(False), ["R0", "R1"], spec, [])
    interconnect = result["stalls"]["interconnect"]
    assert interconnect["status"] == "not_separable" and "no process group" in interconnect["note"]
    assert result["stalls"]["network"]["status"] == "not_measured"  # one machine: not asked, not excused
    assert not any(w.startswith(("impossible", "interconnect stall is")) for w in result["warnings"])
    assert result["iteration_s"] == sum(s["seconds"] or 0 for s in result["stalls"].values()) + result[
        "unattributed_s"]  # fmt: skip
    # With a process group the difference is the interconnect's, and a faster R1 is impossible, said so.
    result = breakdown_of_completed(_apart_doc(True), ["R0", "R1"], spec, [])
    assert result["stalls"]["interconnect"]["status"] != "not_separable"
    assert any(w.startswith("impossible") for w in result["warnings"])


def test_a_data_folder_the_script_opened_nothing_under_is_said() -> None:
    def finished(opens):
        doc = doc_of(*[{"loader_used": True, "batch_size": 8, "data_dir_opens": opens}] * 2)
        doc["phases"][1].update(name="R3", data="cached")
        doc["breakdown"] = {"warnings": [], "stalls": {}}
        finish_script_doc(doc)
        return " ".join(doc["breakdown"]["warnings"])

    assert "opened no file under --data-dir /data in R3" in finished(0)
    assert "opened no file" not in finished(12)
    assert "opened no file" not in finished(None)  # None: not watched


def test_runs_that_read_different_batches_leave_the_batch_size_unknown() -> None:
    # A global batch divided by the world size: R0 read 64 per process, R1 32; the spec kept R0's 64.
    for given in (None, 64):
        doc = doc_of({"loader_used": True, "batch_size": 64}, {"loader_used": True, "batch_size": 32})
        doc["spec"]["batch_size"] = given
        finish_script_doc(doc)
        assert doc["spec"]["batch_size"] is None


def test_a_script_without_a_dataloader_keeps_a_remainder_that_adds_up_and_one_line_about_it() -> None:
    """CPU and disk were blanked after the split: the remainder still held only the cpu's within-noise -6.5
    ms (-103% of the iteration), compute plus it did not make the iteration, and the rounds' 'cpu: ± 429%'
    warning stayed beside 'not separable'."""
    from stash_core.analysis.stalls import REMAINDER
    from stash_core.engine.profiler import breakdown_of_completed
    from stash_core.spec import ProfileSpec

    script = {"loader_used": False, "batch_size": 16, "data_dir_opens": 0}
    times = {"R0": (0.0081, 0.0005), "R3": (0.0016, 0.006), "R2": (0.0063, 0.006)}
    data = {"R0": "synthetic", "R3": "cached", "R2": "cold"}
    phases = [{"name": name, "status": "completed", "workers": 1, "data": data[name], "script": script,
               "iteration_s": {"mean": mean, "ci95": ci95}} for name, (mean, ci95) in times.items()]
    doc = {"phases": phases, "spec": {"batch_size": 16, "data_dir": "/data"}}
    spec = ProfileSpec(model="script", script="train.py", batch_size=16, device="cpu")
    doc["breakdown"] = breakdown_of_completed(doc, ["R0", "R3", "R2"], spec, ["cpu: ± 429% after 3 rounds"])
    finish_script_doc(doc)
    result = doc["breakdown"]
    assert {result["stalls"][name]["status"] for name in ("cpu", "disk")} == {"not_separable"}
    named = sum(entry["seconds"] or 0.0 for entry in result["stalls"].values())
    assert named + result[REMAINDER]["seconds"] == pytest.approx(0.0063)  # the parts add up to t2
    assert not any(w.startswith(("cpu:", "cpu stall", "disk")) for w in result["warnings"])
    said = "cpu and disk stalls not separable: the script iterates no"
    assert any(w.startswith(said) for w in result["warnings"])
    assert any("opened no file under --data-dir /data" in w for w in result["warnings"])  # data elsewhere


def test_what_the_runs_warned_of_is_said_once_after_the_runs_that_said_it() -> None:
    said = {"loader_used": True, "batch_size": 8, "loader_workers": 2, "warnings": ["its dataset ..."]}
    doc = doc_of(said, said, {"loader_used": True, "batch_size": 8, "loader_workers": 2, "warnings": []})
    doc["breakdown"] = {"warnings": [], "stalls": {}}
    finish_script_doc(doc)
    assert [w for w in doc["breakdown"]["warnings"] if "dataset" in w] == ["R0, R1: its dataset ..."]


def test_a_script_without_a_dataloader_says_only_the_loader_stalls_asked_for() -> None:
    """--stalls compute,interconnect on a script printed "CPU prep / disk fetch not separable" lines that a
    model's profile with the same --stalls leaves out."""
    from stash_core.engine.script_job import NO_LOADER, no_loader_stalls

    runs = [{"name": "R0", "script": {"loader_used": False}}]
    assert no_loader_stalls(runs, ["compute", "interconnect"]) == {}
    assert no_loader_stalls(runs, ["compute", "cpu"]) == {"cpu": NO_LOADER}
    assert no_loader_stalls(runs, ["compute", "interconnect", "network", "cpu", "disk"]) == {
        "cpu": NO_LOADER, "disk": NO_LOADER,
    }  # fmt: skip
    assert no_loader_stalls([{"name": "R0", "script": {"loader_used": True}}], ["cpu", "disk"]) == {}


def test_a_script_without_data_dir_says_only_the_loader_stalls_asked_for(tmp_path) -> None:
    """--stalls compute on a script with a DataLoader and no --data-dir still said "cpu stall not separable"
    and "disk stall not separable" in its warnings."""
    import textwrap

    from support import stash_main

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8)
        model = torch.nn.Linear(8, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        while True:
            for (x,) in loader:
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    """))
    done = stash_main("profile", "--script", str(script), "--stalls", "compute", "--iterations", "30",
                      "--max-phase-seconds", "5", "--progress", "none", "--no-store", "--no-probes",
                      "--out", str(tmp_path / "r.json"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not separable" not in done.stdout and "CPU prep" not in done.stdout
    # each stall not measured stores why: the profile's setup, or the user's --stalls
    import json

    from stash_core.analysis.unmeasured import NOT_ASKED, UNMEASURABLE

    stalls = json.loads((tmp_path / "r.json").read_text())["breakdown"]["stalls"]
    assert stalls["network"]["note"] == UNMEASURABLE["network"]  # one machine
    assert stalls["interconnect"]["note"] == UNMEASURABLE["interconnect"]  # one worker
    assert stalls["cpu"]["note"] == stalls["disk"]["note"] == NOT_ASKED  # a script reads data: left out


def test_a_disk_stall_of_a_data_folder_the_script_never_opened_is_not_separable_said_once() -> None:
    """It was stored as a measured 40% disk stall beside the warning that the cold and cached runs differ in
    nothing the disk stall measures."""
    from stash_core.engine.profiler import breakdown_of_completed
    from stash_core.spec import ProfileSpec

    times = {"R0": (0.0081, 0.0005), "R3": (0.0116, 0.0006), "R2": (0.0191, 0.0006)}
    data = {"R0": "synthetic", "R3": "cached", "R2": "cold"}
    script = {"loader_used": True, "batch_size": 16, "data_dir_opens": 0}
    phases = [{"name": name, "status": "completed", "workers": 1, "data": data[name], "script": script,
               "iteration_s": {"mean": mean, "ci95": ci95}} for name, (mean, ci95) in times.items()]
    doc = {"phases": phases, "spec": {"batch_size": 16, "data_dir": "/data"}}
    spec = ProfileSpec(model="script", script="train.py", batch_size=16, device="cpu", data_dir="/data")
    doc["breakdown"] = breakdown_of_completed(doc, ["R0", "R3", "R2"], spec, [])
    finish_script_doc(doc)
    result = doc["breakdown"]
    disk = result["stalls"]["disk"]
    assert disk["status"] == "not_separable" and disk["seconds"] is None
    assert disk["note"].startswith("the script opened no file under --data-dir /data in R3: it reads its")
    assert result["stalls"]["cpu"]["status"] == "measured"  # R3 - R0 is still its data loading
    assert sum("opened no file under" in w for w in result["warnings"]) == 1


def _pipeline_doc(loader_workers: int, r2_parts: dict) -> dict:
    """A script profiled without --data-dir: R1 and R2 (its loader), R2 slower by 2.76 ms ± 1.01 ms."""
    script = {"loader_used": True, "loader_workers": loader_workers}
    r1_parts = {"data_s": 0.00021, "forward_s": 0.0012, "backward_s": 0.00357, "optimizer_s": 0.0004}
    phases = [
        {"name": "R1", "status": "completed", "script": script, "parts_mean_s": r1_parts,
         "iteration_s": {"mean": 0.00467, "ci95": 0.0005}},
        {"name": "R2", "status": "completed", "script": script, "parts_mean_s": {**r1_parts, **r2_parts},
         "iteration_s": {"mean": 0.00743, "ci95": 0.00087}},
    ]  # fmt: skip
    return {"spec": {"batch_size": None, "loader_workers": loader_workers, "data_dir": None},
            "phases": phases, "breakdown": {"warnings": [], "stalls": {}}}  # fmt: skip


def test_an_input_pipeline_difference_that_is_not_in_the_wait_for_data_is_said_to_be_elsewhere() -> None:
    """Other load slowed R2's backward passes (3.57 ms to 6.24 ms) while its wait for data grew by 0.09 ms:
    the 2.76 ms difference was given as the input pipeline's, with nothing said."""
    doc = _pipeline_doc(0, {"data_s": 0.00030, "backward_s": 0.00624})
    finish_script_doc(doc)
    said = [w for w in doc["breakdown"]["warnings"] if w.startswith("of the input pipeline's")]
    assert said == [
        "of the input pipeline's 2.8 ms, the wait for data grew by 90 us (R2 - R1); the rest is in the step "
        "itself (forward +0.00 ms, backward +2.67 ms, optimizer +0.00 ms): other load on the machine slowed "
        "it (a loader without processes loads within the wait)"
    ]
    with_processes = _pipeline_doc(4, {"data_s": 0.00030, "backward_s": 0.00624})
    finish_script_doc(with_processes)
    assert any("its 4 loader process(es) took cores from the training" in w
               for w in with_processes["breakdown"]["warnings"])  # fmt: skip
    in_the_wait = _pipeline_doc(0, {"data_s": 0.00290})  # the loading itself: said as the pipeline alone
    finish_script_doc(in_the_wait)
    assert not any(w.startswith("of the input pipeline's") for w in in_the_wait["breakdown"]["warnings"])


def test_the_sentence_says_a_wait_that_shrank_and_loader_processes_of_unknown_count() -> None:
    from stash_core.analysis.pipeline import outside_the_data_wait

    phases = _pipeline_doc(0, {"data_s": 0.00012, "backward_s": 0.00624})["phases"]
    said = outside_the_data_wait(phases, "R1", 0.00276, 0.001, None)  # runs that disagree on the count
    assert said is not None and "the wait for data shrank by 90 us (R2 - R1)" in said
    assert said.endswith("its loader process(es) took cores from the training, or other load on the machine "
                         "slowed it")  # fmt: skip
    assert outside_the_data_wait(phases, "R1", 0.00276, 0.003, None) is None  # within its interval: no figure
