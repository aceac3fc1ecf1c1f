"""A run's instance label against the machine it ran on: a contradicted label is warned about and the run does
not stand for that instance (costs, recommendations) until the user confirms the label."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core.catalog import (
    check_document,
    check_label,
    check_stored_run,
    confirm_label,
    get_instance,
    label_problems,
)
from stash_core.decide.recommend import recommend
from stash_core.errors import UsageError
from stash_core.store import get_run, ingest_result

G4DN = {"name": "g4dn.xlarge", "accelerator": "NVIDIA T4", "accelerator_count": 1}
P3_8X = {"name": "p3.8xlarge", "accelerator": "NVIDIA V100 16 GB", "accelerator_count": 4}
LAPTOP = {"name": "my-laptop", "accelerator": None, "accelerator_count": 0}
A100_40 = {"name": "a2-highgpu-1g", "accelerator": "NVIDIA A100 SXM4 40 GB", "accelerator_count": 1}
P5 = {"name": "p5.48xlarge", "accelerator": "NVIDIA H100 SXM 80 GB", "accelerator_count": 8}
VM_1VCPU = {"name": "vm-1vcpu", "accelerator": None, "accelerator_count": 0, "vcpus": 1}


def machine(gpus: list[str], status: str = "") -> dict:
    return {
        "gpu_count": len(gpus),
        "gpus": [{"index": index, "name": name} for index, name in enumerate(gpus)],
        "gpu_status": status or f"{len(gpus)} GPU(s)",
    }


def on_gpus(doc: dict, gpus: list[str]) -> dict:
    doc["fingerprint"].update(machine(gpus))
    return doc


@pytest.mark.parametrize(
    ("instance", "fingerprint", "problem"),
    [
        (G4DN, machine([], "no GPU: NVML library not found"), "the machine has no GPU (no GPU: NVML library"),
        (G4DN, machine(["Tesla T4", "Tesla T4"]), "the machine has 2 GPU(s), g4dn.xlarge has 1 NVIDIA T4"),
        (G4DN, machine(["NVIDIA A10G"]), "the machine's GPU is NVIDIA A10G, g4dn.xlarge has NVIDIA T4"),
        (P3_8X, machine(["Tesla V100-SXM2-16GB"] * 2 + ["Tesla K80"] * 2), "the machine's GPU is Tesla K80"),
        (LAPTOP, machine(["NVIDIA H100 80GB HBM3"]), "the machine has 1 GPU(s), my-laptop has none"),
        # variants of one model, told apart by the accelerator table
        (A100_40, machine(["NVIDIA A100-SXM4-80GB"]), "the machine's GPU is NVIDIA A100-SXM4-80GB"),
        (P5, machine(["NVIDIA H100 PCIe"] * 8), "the machine's GPU is NVIDIA H100 PCIe, p5.48xlarge has"),
        # a CPU instance's vCPUs: a 1-vCPU label on a machine of 2 usable cores carried that machine's CPU
        # stall to every 1-vCPU row (recommend said none where whatif, from the machine, said 0.44 s)
        (VM_1VCPU, {**machine([]), "cpu_affinity": [0, 1], "cpu_cores_logical": 8},
         "the machine has 2 logical core(s), vm-1vcpu has 1 vCPU(s)"),
        (VM_1VCPU, {**machine([]), "cpu_cores_logical": 4}, "the machine has 4 logical core(s), vm-1vcpu"),
    ],
)
def test_a_machine_that_contradicts_the_catalog_row_is_named(instance, fingerprint, problem) -> None:
    problems = label_problems(instance, fingerprint)
    assert any(problem in text for text in problems), problems


@pytest.mark.parametrize(
    ("instance", "fingerprint"),
    [
        (G4DN, machine(["Tesla T4"])),
        (P3_8X, machine(["Tesla V100-SXM2-16GB"] * 4)),
        (LAPTOP, machine([])),
        (VM_1VCPU, {**machine([]), "cpu_affinity": [3], "cpu_cores_logical": 8}),  # the core it could use
        ({**VM_1VCPU, "vcpus": None}, {**machine([]), "cpu_cores_logical": 8}),  # no vCPUs to compare
        ({**G4DN, "vcpus": 4}, {**machine(["Tesla T4"]), "cpu_cores_logical": 8}),  # a GPU's: not its cores
        ({"name": "lab", "accelerator": "Test GPU", "accelerator_count": 2}, machine(["Anything", "Else"])),
        ({"name": "unknown-shape", "accelerator": None, "accelerator_count": None}, machine(["Tesla T4"])),
        (G4DN, {"gpu_count": None, "gpus": []}),  # the GPU count could not be read: nothing to contradict
        (A100_40, machine(["NVIDIA A100-SXM4-40GB"])),
        (P5, machine(["NVIDIA H100 80GB HBM3"] * 8)),
        # an ambiguous catalog name fits every variant it could mean
        (
            {"name": "old", "accelerator": "NVIDIA A100 80 GB", "accelerator_count": 1},
            machine(["NVIDIA A100 80GB PCIe"]),
        ),
    ],
)
def test_a_machine_that_fits_or_cannot_tell_is_no_contradiction(instance, fingerprint) -> None:
    assert label_problems(instance, fingerprint) == []


def test_a_verdict_says_why_a_label_was_not_checked_and_a_confirmed_one_stays_visible() -> None:
    cpu_only = machine([])
    assert check_label("r", None, None, {}, cpu_only).reason == "no instance label"
    assert "not in the instance catalog" in check_label("r", "box", None, {}, cpu_only).reason
    remote = check_label("r", "g4dn.xlarge", G4DN, {"hosts": ["gpu-a", "gpu-b"]}, cpu_only)
    assert remote.status == "not_checked" and remote.usable and "remote hosts" in remote.reason
    contradicted = check_label("r", "g4dn.xlarge", G4DN, {}, cpu_only)
    assert contradicted.status == "contradicted" and not contradicted.usable
    assert "`stash instances confirm r`" in contradicted.warning
    confirmed = check_label("r", "g4dn.xlarge", G4DN, {"instance_confirmed": True}, cpu_only)
    assert confirmed.usable and "confirmed by the user" in confirmed.warning
    assert check_label("r", "g4dn.xlarge", G4DN, {}, machine(["Tesla T4"])).warning is None


def test_confirming_a_stored_label_is_kept_with_the_run(tmp_path) -> None:
    db = tmp_path / "labels.duckdb"
    # result_doc's machine has no GPU
    doc = result_doc("resnet18", instance="g4dn.xlarge", workers=1, device="cuda")
    assert check_document(db, doc).status == "contradicted"  # what `stash profile` can say at its end
    ingest_result(db, doc)
    assert check_stored_run(db, get_run(db, doc["run_id"])).status == "contradicted"
    assert confirm_label(db, doc["run_id"]).status == "confirmed"
    run = get_run(db, doc["run_id"])
    assert run["spec"]["instance_confirmed"] is True and run["spec"]["model"] == "resnet18"
    assert check_stored_run(db, run).status == "confirmed"
    assert ingest_result(db, doc) is False  # the same file again: the same run, stored once, still confirmed
    assert get_run(db, doc["run_id"])["spec"]["instance_confirmed"] is True
    unlabelled = result_doc("resnet18", instance=None)
    ingest_result(db, unlabelled)
    with pytest.raises(UsageError, match="no instance label"):
        confirm_label(db, unlabelled["run_id"])
    with pytest.raises(UsageError, match="no run"):
        confirm_label(db, "no-such-run")


def test_a_cpu_run_labelled_as_a_gpu_instance_is_told_to_profile_there_not_to_confirm(tmp_path, capsys):
    """recommend set it aside with "`stash instances confirm RUN` if the label is right", and after the
    confirmation set it aside all the same (a CPU run measures no GPU): the advice led nowhere."""
    from stash_core.cli.main import main

    db = tmp_path / "labels.duckdb"
    doc = result_doc("resnet18", instance="g4dn.xlarge", workers=1, device="cpu", batch_size=8)
    ingest_result(db, doc)
    ask = {"epochs": 1, "dataset_images": 10_000, "budget_hours": 100.0, "instances": ["g4dn.xlarge"]}
    aside = recommend(db, "resnet18", 8, **ask).profiles_set_aside
    [line] = [line for line in aside if doc["run_id"] in line]
    assert "instances confirm" not in line and "measures no GPU of g4dn.xlarge" in line, line
    warning = check_stored_run(db, get_run(db, doc["run_id"])).warning  # at the profile's end, in the pages
    assert "measures no GPU of g4dn.xlarge" in warning and "prices it in Compare only" in warning
    assert main(["instances", "confirm", doc["run_id"], "--db", str(db)]) == 0
    said = capsys.readouterr().out  # Compare prices it now; predictions still cannot use it, and say so
    assert "predict and recommend still leave it out: a run on the CPU measures no GPU" in said
    assert check_stored_run(db, get_run(db, doc["run_id"])).status == "confirmed"


def test_recommend_sets_a_contradicted_profile_aside_until_it_is_confirmed(tmp_path) -> None:
    db = tmp_path / "rec.duckdb"
    stalls = {"compute": 0.2, "interconnect": 0.05}
    fitting = on_gpus(
        result_doc("resnet50", instance="p3.8xlarge", workers=4, device="cuda", batch_size=64, stalls=stalls),
        ["Tesla V100-SXM2-16GB"] * 4,
    )
    wrong = result_doc(  # a CPU-only machine labelled as a 4-GPU instance
        "resnet50", instance="p3.8xlarge", workers=4, device="cuda", batch_size=64, stalls=stalls
    )
    ingest_result(db, fitting)
    ingest_result(db, wrong)
    ask = {"epochs": 1, "dataset_images": 100_000, "budget_hours": 100.0, "instances": ["p3.8xlarge"]}
    result = recommend(db, "resnet50", 64, max_instances=1, **ask)
    measured = result.options[result.options["source"] == "measured"]
    assert list(measured["run_id"]) == [fitting["run_id"]]
    assert len(result.label_warnings) == 1 and wrong["run_id"] in result.label_warnings[0]
    assert any(wrong["run_id"] in line and "set aside" in line for line in result.profiles_set_aside)
    confirm_label(db, wrong["run_id"])
    again = recommend(db, "resnet50", 64, max_instances=1, **ask)
    assert "confirmed by the user" in again.label_warnings[0]
    assert not any("set aside" in line for line in again.profiles_set_aside)
    assert get_instance(db, "p3.8xlarge")["accelerator_count"] == 4
