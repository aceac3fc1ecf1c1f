"""A stored GPU profile stands for the precision it ran in (PyTorch's defaults: TF32 convolutions and
recurrent layers where the GPU has TF32, FP32 matrix products), and a profile on a machine whose label is not
a catalog instance still anchors the scaled path through the GPU its machine reported."""

from __future__ import annotations

import pandas as pd
import pytest
from result_docs import result_doc

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict import predict_instances
from stash_core.decide.predict.profile_arithmetic import cudnn_share, profile_precisions, ran_as
from stash_core.decide.predict.step_cost import step_cost
from stash_core.decide.recommend import recommend
from stash_core.store import ingest_result

A100 = find_accelerator("NVIDIA A100-SXM4-40GB")
V100 = find_accelerator("Tesla V100-SXM2-16GB")


def _gpu_profile(
    db, model: str, instance: str, gpu_name: str, compute_s: float, batch: int = 8, shape: list | None = None
) -> str:
    shape = {"input_shape": shape or ([3, 64, 64] if model.startswith("resnet") else None)}
    doc = result_doc(model, instance=instance, workers=1, device="cuda", batch_size=batch, spec_extra=shape,
                     stalls={"compute": compute_s, "cpu": 0.001, "disk": 0.001})  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": gpu_name}], gpu_status="1 GPU(s)")
    ingest_result(db, doc)
    return doc["run_id"]


def test_the_precisions_a_profile_stands_for():
    assert A100 is not None and V100 is not None
    assert profile_precisions(A100, 0.99) == ("tf32",)  # convolutions in TF32 by PyTorch's default
    assert profile_precisions(A100, 0.0) == ("fp32",)  # matrix products stay FP32 by default
    assert profile_precisions(V100, 0.99) == ("fp32", "tf32")  # no TF32 units: both run alike
    assert profile_precisions(None, 0.99) == ("fp32",)  # a CPU
    assert ran_as(("tf32",)).startswith("tf32 (PyTorch's default")


def test_a_convolutional_steps_matrix_work_is_its_convolutions_and_a_transformers_is_not():
    assert cudnn_share(step_cost("resnet18", 8, (3, 64, 64))) > 0.95
    assert cudnn_share(step_cost("bert_tiny", 4)) == 0.0


def test_a_cnn_profile_on_an_a100_measures_the_tf32_job_not_the_fp32_one(tmp_path):
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05, batch=8)
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1, input_shape=(3, 64, 64))
    tf32 = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame.iloc[0]
    assert tf32["path"] == "measured" and run_id in tf32["basis"]
    assert tf32["compute_s"] == pytest.approx(0.05)
    fp32 = predict_instances(db, "resnet18", 8, precision="fp32", **asked).frame.iloc[0]
    assert fp32["path"] == "roofline"  # TF32 convolutions are no measurement of an FP32 job


def test_a_transformer_profile_on_an_a100_measures_the_fp32_job(tmp_path):
    db = tmp_path / "r.duckdb"
    _gpu_profile(db, "bert_tiny", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.02, batch=4)
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1)
    frames = {precision: predict_instances(db, "bert_tiny", 4, precision=precision, **asked).frame
              for precision in ("fp32", "tf32")}  # fmt: skip
    paths = {precision: frame.iloc[0]["path"] for precision, frame in frames.items()}
    assert paths == {"fp32": "measured", "tf32": "roofline"}


def test_a_recurrent_profile_on_an_a100_measures_the_tf32_job(tmp_path):
    """PyTorch's cuDNN flag sets the math of recurrent layers as of convolutions: TF32 by default."""
    path = tmp_path / "lstm.py"
    path.write_text(
        "import torch\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.rnn = torch.nn.LSTM(256, 256, 2, batch_first=True)\n"
        "        self.head = torch.nn.Linear(256, 10)\n\n"
        "    def forward(self, x):\n"
        "        return self.head(self.rnn(x)[0][:, -1])\n\n"
        "def make():\n"
        "    return Net()\n"
    )
    model = f"{path}:make"
    assert cudnn_share(step_cost(model, 8, (16, 256))) > 0.95
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, model, "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.01, shape=[16, 256])
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1, input_shape=(16, 256))
    tf32 = predict_instances(db, model, 8, precision="tf32", **asked).frame.iloc[0]
    assert tf32["path"] == "measured" and run_id in tf32["basis"]
    fp32 = predict_instances(db, model, 8, precision="fp32", **asked)
    assert fp32.frame.iloc[0]["path"] == "roofline"
    assert "TF32 in cuDNN's convolutions and recurrent layers" in fp32.profiles_set_aside[0]


def test_a_profile_on_an_uncatalogued_machine_is_scaled_from_the_gpu_it_reported(tmp_path):
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "lab-box-7", "NVIDIA H200", 0.05, batch=8)
    asked = dict(gpus=["H100"], workers_per_instance=1, max_instances=1, input_shape=(3, 64, 64))
    frame = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame
    assert len(frame) and (frame["path"] == "scaled").all()
    assert frame["basis"].str.contains(f"{run_id} on lab-box-7").all()


def test_recommend_sets_an_a100_cnn_profile_aside_for_an_fp32_job_with_what_it_ran(tmp_path):
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05, batch=8)
    asked = dict(epochs=1, dataset_images=10_000, budget_hours=1000, instances=["a2-highgpu-1g"],
                 input_shape=(3, 64, 64))  # fmt: skip
    fp32 = recommend(db, "resnet18", 8, **asked)
    line = f"profile {run_id} on a2-highgpu-1g: set aside, it ran in tf32 (PyTorch's default on this GPU"
    assert any(excluded.startswith(line) for excluded in fp32.profiles_set_aside)
    assert any(excluded.endswith("and the job trains in fp32") for excluded in fp32.profiles_set_aside)
    tf32 = recommend(db, "resnet18", 8, precision="tf32", **asked)
    assert not any(run_id in excluded for excluded in tf32.profiles_set_aside)
    assert not any(
        line.startswith("profile ") for line in fp32.excluded
    )  # instances only (JSON not_predicted)
    assert fp32.to_json()["profiles_set_aside"] == fp32.profiles_set_aside
    assert (tf32.options["source"] == "measured").any()


def test_predict_says_which_stored_profile_of_the_job_it_set_aside_and_why(tmp_path, capsys):
    from stash_core.cli.main import main

    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05)
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1, input_shape=(3, 64, 64))
    fp32 = predict_instances(db, "resnet18", 8, precision="fp32", **asked)
    line = f"profile {run_id} on a2-highgpu-1g: set aside, it ran in tf32 (PyTorch's default on this GPU"
    assert len(fp32.profiles_set_aside) == 1 and fp32.profiles_set_aside[0].startswith(line)
    assert fp32.to_json()["profiles_set_aside"] == fp32.profiles_set_aside
    assert predict_instances(db, "resnet18", 8, precision="tf32", **asked).profiles_set_aside == []
    argv = ["predict", "--model", "resnet18", "--batch-size", "8", "--input-shape", "3,64,64",
            "--instances", "a2-highgpu-1g", "--precision", "fp32", "--db", str(db)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "stored profiles of this job set aside (1):" in out and line in out


def test_a_profile_whose_machine_contradicts_its_label_anchors_no_prediction(tmp_path):
    """Labelled p3.2xlarge (a V100) but run on an A100: neither measured nor scaled from, and said why."""
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "p3.2xlarge", "NVIDIA A100-SXM4-40GB", 0.05)
    asked = dict(instances=["p3.2xlarge", "g4dn.xlarge"], workers_per_instance=1, input_shape=(3, 64, 64))
    result = predict_instances(db, "resnet18", 8, precision="tf32", **asked)
    assert set(result.frame["path"]) == {"roofline"}
    line = f"profile {run_id} on p3.2xlarge: set aside, its machine does not fit the label"
    assert any(found.startswith(line) for found in result.profiles_set_aside)


def test_scaling_takes_a_profile_on_the_same_gpu_before_a_newer_one_on_another(tmp_path):
    db = tmp_path / "r.duckdb"
    older = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05)
    _gpu_profile(db, "resnet18", "g4dn.xlarge", "Tesla T4", 0.02)
    asked = dict(instances=["a2-highgpu-2g"], workers_per_instance=1, input_shape=(3, 64, 64))
    row = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame.iloc[0]
    assert row["path"] == "scaled" and older in row["basis"]
    assert row["compute_s"] == pytest.approx(0.05)  # the same GPU: a ratio of one


def test_a_gpu_profile_without_an_instance_label_scales_from_its_gpu_and_is_named_as_such(tmp_path):
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", None, "NVIDIA A100-SXM4-40GB", 0.05)
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1, input_shape=(3, 64, 64))
    tf32 = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame.iloc[0]
    assert tf32["path"] == "scaled" and f"{run_id} on an unlabelled machine" in tf32["basis"]
    fp32 = predict_instances(db, "resnet18", 8, precision="fp32", **asked)
    assert fp32.profiles_set_aside[0].startswith(f"profile {run_id} on an unlabelled machine: set aside")


def test_recommend_keeps_a_tf32_profile_beside_a_set_aside_one_and_never_prices_a_gpu_by_a_cpu_run(tmp_path):
    db = tmp_path / "r.duckdb"
    on_gpu = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05)
    laptop = result_doc("resnet18", instance="laptop", workers=1, device="cpu", batch_size=8,
                        spec_extra={"input_shape": [3, 64, 64]}, stalls={"compute": 0.9})  # fmt: skip
    on_cpu = result_doc("resnet18", instance="g4dn.xlarge", workers=1, device="cpu", batch_size=8,
                        spec_extra={"input_shape": [3, 64, 64]}, stalls={"compute": 0.9})  # fmt: skip
    on_cpu["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla T4"}], gpu_status="1 GPU(s)")
    for doc in (laptop, on_cpu):
        ingest_result(db, doc)
    instances = ["a2-highgpu-1g", "g4dn.xlarge"]
    asked = dict(
        epochs=1, dataset_images=10_000, budget_hours=1000, instances=instances, input_shape=(3, 64, 64)
    )
    tf32 = recommend(db, "resnet18", 8, precision="tf32", **asked)
    assert not any(on_gpu in line for line in tf32.profiles_set_aside)  # kept beside the CPU one set aside
    assert any(line.startswith(f"profile {laptop['run_id']} on laptop: set aside, it ran in fp32")
               for line in tf32.profiles_set_aside)  # fmt: skip
    measured = tf32.options[tf32.options["source"] == "measured"]
    assert set(measured["instance"]) == {"a2-highgpu-1g"}
    line = f"profile {on_cpu['run_id']} on g4dn.xlarge: set aside, it ran on the CPU (--device cpu)"
    assert any(excluded.startswith(line) for excluded in tf32.profiles_set_aside)
    # `predict` says the same of the CPU run (it listed nothing: its GPU profiles alone were read)
    asked = dict(instances=instances, input_shape=(3, 64, 64))
    predicted = predict_instances(db, "resnet18", 8, precision="tf32", **asked)
    assert any(excluded.startswith(line) for excluded in predicted.profiles_set_aside)


def test_more_machines_of_a_profiled_one_keep_its_measured_interconnect(tmp_path):
    """One p4d measured 50 ms of compute and 20 ms of interconnect: two of them were predicted at 3 ms of
    interconnect, faster per step than the one measured (2.4 times the throughput on twice the GPUs)."""
    db = tmp_path / "r.duckdb"
    doc = result_doc(
        "resnet18",
        instance="p4d.24xlarge",
        workers=8,
        device="cuda",
        batch_size=8,
        spec_extra={"input_shape": [3, 64, 64]},
        stalls={"compute": 0.05, "interconnect": 0.02},
    )
    gpus = [{"index": index, "name": "NVIDIA A100-SXM4-40GB"} for index in range(8)]
    doc["fingerprint"].update(gpu_count=8, gpus=gpus, gpu_status="8 GPU(s)")
    ingest_result(db, doc)
    asked = dict(instances=["p4d.24xlarge"], max_instances=2, input_shape=(3, 64, 64))
    rows = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame.set_index("instance_count")
    assert rows.loc[1, "interconnect_s"] == pytest.approx(0.02)
    assert rows.loc[2, "interconnect_s"] == pytest.approx(0.02) and rows.loc[2, "network_s"] > 0
    assert rows.loc[2, "iteration_s"] > rows.loc[1, "iteration_s"]


def test_a_step_that_cannot_be_counted_leaves_its_profiles_standing_for_fp32():
    assert profile_precisions(A100, None) == ("fp32",)


def test_a_zoo_model_typed_in_another_case_finds_its_profiles_in_predict_and_recommend(tmp_path):
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05, batch=8)
    shape = dict(input_shape=(3, 64, 64), precision="tf32", instances=["a2-highgpu-1g"])
    row = predict_instances(db, " ResNet18", 8, workers_per_instance=1, **shape).frame.iloc[0]
    assert row["path"] == "measured" and run_id in row["basis"]  # the zoo builds ResNet18 as resnet18
    answer = recommend(db, "RESNET18", 8, epochs=1, dataset_images=10_000, budget_hours=1000, **shape)
    assert (answer.options["source"] == "measured").any()
    assert answer.to_json()["job"]["model"] == "resnet18"


def test_a_model_known_only_by_profiles_all_set_aside_is_not_said_to_have_none(tmp_path):
    db = tmp_path / "r.duckdb"
    on_cpu = result_doc("mynet", instance="g4dn.xlarge", workers=1, device="cpu", batch_size=8,
                        stalls={"compute": 0.9})  # fmt: skip
    on_cpu["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla T4"}], gpu_status="1 GPU(s)")
    ingest_result(db, on_cpu)
    asked = dict(epochs=1, dataset_images=10_000, budget_hours=9, instances=["g4dn.xlarge"])
    answer = recommend(db, "mynet", 8, **asked)
    assert any(on_cpu["run_id"] in line for line in answer.profiles_set_aside)
    assert answer.excluded[0].startswith(
        "g4dn.xlarge: no profile that stands for this job (1 set aside, each said with why) and no prediction"
    )


def test_by_default_a_job_trains_as_pytorch_leaves_it_and_every_profile_of_it_holds(tmp_path):
    """A CNN's convolutions run in TF32 on an A100 unless the job turns that off: predicted so by default (it
    was predicted in FP32 throughout, about twice as slow there), and its profile on one holds; a
    transformer's matrix products stay in FP32."""
    db = tmp_path / "r.duckdb"
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05)
    asked = dict(instances=["a2-highgpu-1g"], workers_per_instance=1, input_shape=(3, 64, 64))
    default = predict_instances(db, "resnet18", 8, precision="pytorch", **asked)
    assert default.request["precision"] == "tf32" and "PyTorch's default" in default.request["precision_why"]
    assert default.profiles_set_aside == [] and run_id in default.frame["basis"].iloc[0]
    on_fp32 = predict_instances(tmp_path / "none.duckdb", "resnet18", 8, precision="fp32", **asked)
    on_tf32 = predict_instances(tmp_path / "none.duckdb", "resnet18", 8, precision="tf32", **asked)
    unmeasured = predict_instances(tmp_path / "none.duckdb", "resnet18", 8, precision="pytorch", **asked)
    # its convolutions in TF32, its one fully connected layer (0.03% of its matrix work) in FP32
    steps = [run.frame["iteration_s"].iloc[0] for run in (on_tf32, unmeasured, on_fp32)]
    assert steps[0] < steps[1] < steps[2] and steps[1] == pytest.approx(steps[0], rel=1e-3)
    assert on_fp32.request["precision_why"] is None  # asked for, so not explained
    bert = predict_instances(tmp_path / "none.duckdb", "bert_base", 8, ["a2-highgpu-1g"], precision="pytorch")
    assert bert.request["precision"] == "fp32" and "matrix products" in bert.request["precision_why"]
    shape = (3, 64, 64)
    answer = recommend(db, "resnet18", 8, 1, 1000, budget_hours=1, input_shape=shape, precision="pytorch")
    assert answer.request["precision"] == "tf32" and not answer.profiles_set_aside


def test_the_default_precision_explains_itself_only_where_it_chose():
    """A model known only by its profiles was restated as 'PyTorch's default for its matrix products'."""
    from stash_core.decide.predict.profile_arithmetic import default_precision

    assert default_precision(None)[0] == "fp32" and "known only by its profiles" in default_precision(None)[1]


def test_a_gpu_configuration_measured_whole_carries_its_profiles_interval(tmp_path):
    """A CPU machine's profiled configuration and a script's own run carried their profile's 95% interval in
    `stash predict`; a GPU profile's did not: the same step, measured, shown without its uncertainty."""
    db = tmp_path / "r.duckdb"
    doc = result_doc("resnet18", instance="p4d.24xlarge", workers=8, device="cuda", batch_size=8,
                     spec_extra={"input_shape": [3, 64, 64]}, stalls={"compute": 0.05, "interconnect": 0.02})
    gpus = [{"index": index, "name": "NVIDIA A100-SXM4-40GB"} for index in range(8)]
    doc["fingerprint"].update(gpu_count=8, gpus=gpus, gpu_status="8 GPU(s)")
    ingest_result(db, doc)
    breakdown = doc["breakdown"]
    relative = breakdown["iteration_ci95_s"] / breakdown["iteration_s"]
    asked = dict(instances=["p4d.24xlarge"], max_instances=2, input_shape=(3, 64, 64))
    rows = predict_instances(db, "resnet18", 8, precision="tf32", **asked).frame.set_index("instance_count")
    assert rows.loc[1, "iteration_ci95_s"] == pytest.approx(relative * rows.loc[1, "iteration_s"])
    assert pd.isna(rows.loc[2, "iteration_ci95_s"])  # two machines: its network is predicted
    run_id = _gpu_profile(db, "resnet18", "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05, batch=8)
    one = predict_instances(db, "resnet18", 8, precision="tf32", instances=["a2-highgpu-1g"],
                            workers_per_instance=1, input_shape=(3, 64, 64)).frame.iloc[0]  # fmt: skip
    assert run_id in one["basis"] and one["iteration_ci95_s"] == pytest.approx(0.01 * one["iteration_s"])
