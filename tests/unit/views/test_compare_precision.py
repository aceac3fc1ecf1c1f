"""Compare predicts the instances not measured in the precision the measured job trained in: Stash's GPU
profiles keep PyTorch's defaults, so a CNN profiled on a GPU with TF32 units ran TF32 convolutions and its
predictions are for tf32 (scaled from that profile); a transformer's, a CPU's or a V100's are for fp32; GPU
profiles that disagree give fp32 and say so, with the profile the predictions set aside."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc

from stash_core import store, views

A100 = "NVIDIA A100-SXM4-40GB"


def gpu_profile(db: Path, instance: str, gpu_name: str, compute_s: float, model: str = "resnet18") -> str:
    """A one-GPU profile of `model` at batch 8 (64x64 images for a CNN) on a machine with `gpu_name`."""
    shape = {"input_shape": [3, 64, 64] if model.startswith("resnet") else None}
    doc = result_doc(model, instance=instance, workers=1, device="cuda", batch_size=8, spec_extra=shape,
                     stalls={"compute": compute_s, "cpu": 0.001, "disk": 0.001})  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": gpu_name}], gpu_status="1 GPU(s)")
    assert store.ingest_result(db, doc)
    return doc["run_id"]


def compared(db: Path, model: str = "resnet18"):
    frame = views.compare.compare_with_predictions(db, model, 8, device="cuda")
    return frame, frame[frame["source"] == "predicted"].set_index("instance")


def test_a_cnn_profiled_on_an_h200_is_predicted_in_tf32_scaled_from_its_profile(tmp_path: Path) -> None:
    """The H200 profile measured 50 ms of TF32 compute: another H200 instance is predicted at that, not at an
    FP32 roofline (which was 1.6x slower than the same GPU's measurement)."""
    db = tmp_path / "r.duckdb"
    run_id = gpu_profile(db, "lab-box-7", "NVIDIA H200", 0.05)
    frame, predicted = compared(db)
    assert frame.attrs["precision"] == "tf32"
    assert frame.attrs["precision_note"] == (
        "predicted for tf32: the GPU profile(s) ran in tf32 (PyTorch's default on this GPU: TF32 in cuDNN's "
        "convolutions and recurrent layers)"
    )
    assert predicted.loc["p5en.48xlarge", "compute_s"] == pytest.approx(0.05)
    assert predicted["compute_s"].gt(0).all() and frame.attrs["profiles_set_aside"] == []
    assert frame.attrs["machines"][0]["run_id"] == run_id


def test_a_transformer_profiled_on_an_a100_is_predicted_in_fp32(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "a2-highgpu-1g", A100, 0.02, model="bert_tiny")
    frame, _ = compared(db, "bert_tiny")
    assert frame.attrs["precision"] == "fp32"
    assert frame.attrs["precision_note"] == "predicted for fp32: the GPU profile(s) ran in fp32"


def test_a_cnn_profiled_on_a_gpu_without_tf32_units_is_predicted_in_fp32(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "p3.2xlarge", "Tesla V100-SXM2-16GB", 0.05)
    frame, _ = compared(db)
    assert frame.attrs["precision"] == "fp32"
    assert "alike on GPUs without TF32 units" in frame.attrs["precision_note"]


def test_a_cpu_job_is_predicted_in_fp32(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    assert store.ingest_result(db, result_doc("resnet18", batch_size=8, workers=1, instance="box"))
    frame = views.compare.compare_with_predictions(db, "resnet18", 8)
    assert frame.attrs["precision"] == "fp32"
    assert frame.attrs["precision_note"] == "predicted for fp32: the measured runs trained on CPUs, in FP32"


def test_gpu_profiles_that_disagree_give_fp32_and_say_which_ran_what(tmp_path: Path) -> None:
    """An A100 CNN profile ran TF32 convolutions; one on a GPU Stash has no row for stands for fp32: the job's
    precision cannot be told, so fp32 (PyTorch's default), and the A100 profile is set aside, said."""
    db = tmp_path / "r.duckdb"
    a100 = gpu_profile(db, "a2-highgpu-1g", A100, 0.05)
    other = gpu_profile(db, "lab-box", "Mystery GPU 9000", 0.08)
    frame, predicted = compared(db)
    assert frame.attrs["precision"] == "fp32"
    note = frame.attrs["precision_note"]
    assert note.startswith(
        "predicted for fp32: PyTorch's default precision, as the GPU profiles do not agree"
    )
    assert f"{a100} on a2-highgpu-1g ran in tf32" in note and f"{other} on lab-box ran in fp32" in note
    [line] = frame.attrs["profiles_set_aside"]
    assert line.startswith(f"profile {a100} on a2-highgpu-1g: set aside") and "trains in fp32" in line
    assert len(predicted)


def test_a_model_built_in_bfloat16_is_predicted_in_its_own_precision(tmp_path: Path, monkeypatch) -> None:
    # the note said "predicted for fp32" beside predictions made on the 16-bit units. The zoo has no model
    # built in 16 bits, and the page imports no model file a stored run names: this stands for a zoo model.
    from stash_core.views import compare

    model_file = tmp_path / "lm.py"
    model_file.write_text(
        "import torch\n\n\ndef make(num_classes=10):\n"
        "    body = torch.nn.Sequential(\n"
        "        torch.nn.Embedding(100, 32), torch.nn.Flatten(), torch.nn.Linear(512, 10)\n"
        "    )\n"
        "    return body.to(torch.bfloat16)\n"
    )
    model, db = f"{model_file}:make", tmp_path / "r.duckdb"
    zoo_name = compare.is_zoo_name
    monkeypatch.setattr(compare, "is_zoo_name", lambda ref: zoo_name(ref) or ref == model)
    doc = result_doc(model, instance="a2-highgpu-1g", workers=1, device="cuda", batch_size=8,
                     spec_extra={"input_shape": [16]}, stalls={"compute": 0.02})  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": A100}], gpu_status="1 GPU(s)")
    assert store.ingest_result(db, doc)
    frame, predicted = compared(db, model)
    assert frame.attrs["precision"] == "16-bit weights (the model's own)"
    note = frame.attrs["precision_note"]
    assert note == "predicted in 16-bit weights (the model's own): the model was built so"
    assert len(predicted) > 0
