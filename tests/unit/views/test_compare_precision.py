"""Compare predicts the instances not measured as the measured job trained: in PyTorch's default arithmetic
(Stash's workers set none), so a CNN is predicted in tf32 (TF32 convolutions on GPUs with TF32 units) and a
transformer in fp32, said with why, and every GPU profile of the job anchors its predictions, on whatever GPU
it ran."""

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


TF32_NOTE = (
    "predicted for tf32: PyTorch's default for its convolutions and recurrent layers, where the GPU has "
    "TF32, "
    "as the measured runs trained"
)


def test_a_cnn_profiled_on_an_h200_is_predicted_in_tf32_scaled_from_its_profile(tmp_path: Path) -> None:
    """The H200 profile measured 50 ms of TF32 compute: another H200 instance is predicted at that, not at an
    FP32 roofline (which was 1.6x slower than the same GPU's measurement)."""
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "lab-box-7", "NVIDIA H200", 0.05)
    frame, predicted = compared(db)
    assert frame.attrs["precision"] == "tf32" and frame.attrs["precision_note"] == TF32_NOTE
    assert predicted.loc["p5en.48xlarge", "compute_s"] == pytest.approx(0.05)
    assert predicted["compute_s"].gt(0).all() and frame.attrs["profiles_set_aside"] == []


def test_a_transformer_profiled_on_an_a100_is_predicted_in_fp32(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "a2-highgpu-1g", A100, 0.02, model="bert_tiny")
    frame, predicted = compared(db, "bert_tiny")
    assert frame.attrs["precision"] == "fp32"
    assert frame.attrs["precision_note"] == (
        "predicted for fp32: PyTorch's default for its matrix products, as the measured runs trained"
    )
    assert predicted.loc["a2-highgpu-2g", "compute_s"] == pytest.approx(0.02)  # its profile, same GPU


def test_a_cnn_profiled_on_a_v100_is_predicted_in_tf32_where_a_gpu_has_it_scaled_from_the_v100(
    tmp_path: Path,
) -> None:
    """A V100 runs TF32 convolutions on its FP32 cores: the profile stands for the job PyTorch runs, which an
    A100 runs in TF32 (these were predicted in FP32, the A100's slower arithmetic)."""
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "p3.2xlarge", "Tesla V100-SXM2-16GB", 0.05)
    frame, predicted = compared(db)
    assert frame.attrs["precision"] == "tf32" and frame.attrs["precision_note"] == TF32_NOTE
    assert predicted.loc["p3.8xlarge", "compute_s"] == pytest.approx(0.05)  # the profile holds


def test_a_cpu_job_is_predicted_on_gpus_as_pytorch_would_train_it(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    assert store.ingest_result(db, result_doc("resnet18", batch_size=8, workers=1, instance="box"))
    frame = views.compare.compare_with_predictions(db, "resnet18", 8)
    assert frame.attrs["precision"] == "tf32"
    on_cpus = "as PyTorch trains it on these GPUs (the measured runs trained on CPUs)"
    assert frame.attrs["precision_note"] == TF32_NOTE.replace("as the measured runs trained", on_cpus)


def test_gpu_profiles_on_different_gpus_all_hold_for_the_job_none_is_set_aside(tmp_path: Path) -> None:
    """An A100 CNN profile and one on a GPU Stash has no row for ran the same job, PyTorch's default: they
    were read as TF32 against FP32, the job's precision called fp32, and the A100 profile set aside."""
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "a2-highgpu-1g", A100, 0.05)
    gpu_profile(db, "lab-box", "Mystery GPU 9000", 0.08)
    frame, predicted = compared(db)
    assert frame.attrs["precision"] == "tf32" and frame.attrs["profiles_set_aside"] == []
    assert predicted.loc["a2-highgpu-2g", "compute_s"] == pytest.approx(0.05)


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


def test_a_predicted_row_bound_by_the_hosts_dispatch_says_so_as_predict_does(tmp_path: Path) -> None:
    """Predict's table says an overhead-bound step ranks by the host, not the GPU; Compare's rows did not,
    and their H200 and H100 read as a meaningful ranking."""
    db = tmp_path / "r.duckdb"
    gpu_profile(db, "a2-highgpu-1g", A100, 0.002)
    _, predicted = compared(db)
    bound = predicted[predicted["meaning"].str.startswith("overhead-bound")]
    assert len(bound) and set(bound["meaning"]) == {
        "overhead-bound: the host's dispatch of every kernel, not the GPU, sets the step"
    }
    cells, said = views.compare.meaning_cells(predicted["meaning"])
    assert set(cells[bound.index]) == {"overhead-bound"}  # short in the table: every row was 8 lines tall
    words = "overhead-bound: the host's dispatch of every kernel, not the GPU, sets the step"
    assert said == {"overhead-bound": words}  # said once, under the table
