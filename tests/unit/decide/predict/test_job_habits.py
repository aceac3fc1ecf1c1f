"""A job's training habits (memory format, optimizer and its implementation, attention) in the prediction:
each moves the step as the step model says, is restated in the answer, and one a model cannot have is one
line."""

from __future__ import annotations

import json

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.cli.main import main
from stash_core.decide.predict.configuration import Predictor
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob

A100 = find_accelerator("A100")
CATALOG = {"one": {"accelerator": "NVIDIA A100 SXM4 40 GB", "interconnect": "none"}}


def step_s(model: str, batch: int, precision: str, job: TrainingJob, shape=None) -> float:
    return Predictor(model, batch, CATALOG, precision=precision, input_shape=shape, job=job).compute(A100).step_s


def test_channels_last_saves_the_layout_conversions_of_tensor_core_convolutions():
    nchw = step_s("resnet18", 64, "amp", TrainingJob())
    channels_last = step_s("resnet18", 64, "amp", TrainingJob(memory_format="channels_last"))
    assert channels_last < 0.9 * nchw


def test_the_optimizers_implementation_changes_its_kernels_and_adamw_moves_more_bytes_than_sgd():
    steps = {impl: step_s("resnet18", 8, "fp32", TrainingJob(optimizer_impl=impl)) for impl in ("fused", "foreach", "loop")}
    assert steps["fused"] <= steps["foreach"] < steps["loop"]
    assert step_s("resnet18", 8, "fp32", TrainingJob(optimizer="adamw")) > steps["foreach"]


def test_eager_attention_is_slower_than_fused():
    fused = step_s("bert_base", 8, "amp", TrainingJob(), (512,))
    eager = step_s("bert_base", 8, "amp", TrainingJob(attention="eager"), (512,))
    assert eager > fused


@pytest.mark.parametrize(
    ("model", "job", "says"),
    [
        ("bert_base", TrainingJob(memory_format="channels_last"), "--memory-format is for image models"),
        ("resnet18", TrainingJob(attention="eager"), "--attention is for transformers"),
        ("resnet18", TrainingJob(optimizer="rmsprop", optimizer_impl="fused"), "rmsprop has no fused"),
    ],
)
def test_a_habit_the_model_cannot_have_is_refused(model, job, says):
    with pytest.raises(UsageError, match=says):
        Predictor(model, 8, CATALOG, job=job)


def test_the_answer_restates_the_job(tmp_path, capsys):
    argv = ["predict", "--model", "resnet18", "--batch-size", "8", "--instances", "p3.2xlarge", "--memory-format",
            "channels_last", "--optimizer-impl", "fused", "--format", "json", "--db", str(tmp_path / "x.duckdb")]  # fmt: skip
    assert main(argv) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert (job["memory_format"], job["optimizer"], job["optimizer_impl"]) == ("channels_last", "sgd", "fused")
    assert job["habits"] == "channels_last, sgd (fused)"
    argv[argv.index("resnet18")] = "gpt2"
    assert main(argv) == 2
    captured = capsys.readouterr()
    refusal = json.loads(captured.out)  # asked for JSON: the refusal is JSON too, and one line on stderr
    assert refusal["exit_status"] == 2 and "--memory-format" in refusal["error"]
    assert captured.err.count("\n") == 1 and "--memory-format" in captured.err


def test_a_model_of_feature_vectors_has_no_memory_format_to_restate_or_choose(tmp_path, capsys):
    """An LSTM over (timesteps, features) was restated as "nchw, sgd (foreach)" and took channels_last without
    a word: a memory format is a layout of (C, H, W) images."""
    path = tmp_path / "recurrent.py"
    path.write_text(
        "import torch\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.rnn = torch.nn.LSTM(32, 32, batch_first=True)\n"
        "        self.head = torch.nn.Linear(32, 10)\n\n"
        "    def forward(self, x):\n"
        "        return self.head(self.rnn(x)[0][:, -1])\n\n"
        "def make():\n"
        "    return Net()\n"
    )
    common = ["--model", f"{path}:make", "--input-shape", "16,32", "--batch-size", "8", "--format", "json",
              "--db", str(tmp_path / "x.duckdb")]  # fmt: skip
    assert main(["predict", *common, "--instances", "p3.2xlarge"]) == 0
    assert json.loads(capsys.readouterr().out)["job"]["habits"] == "sgd (foreach)"
    recommend = ["recommend", *common, "--budget-hours", "10", "--dataset-samples", "1000", "--epochs", "1"]
    assert main(recommend) == 0
    assert json.loads(capsys.readouterr().out)["job"]["habits"] == "sgd (foreach)"
    for command in (["predict", *common, "--instances", "p3.2xlarge"], recommend):
        assert main([*command, "--memory-format", "channels_last"]) == 2
        captured = capsys.readouterr()
        assert "this model takes inputs that are not images (C,H,W)" in captured.err
        assert captured.err.count("\n") == 1


def test_a_token_model_that_calls_no_fused_attention_has_none_to_restate_or_choose(tmp_path, capsys):
    """A text LSTM was restated with "fused attention" and took --attention eager without a word, though the
    flag only changes how scaled_dot_product_attention is counted."""
    from support import REPO

    model = f"{REPO / 'examples' / 'models' / 'recurrent.py'}:text_lstm"
    db = str(tmp_path / "x.duckdb")
    argv = ["predict", "--model", model, "--input-shape", "32", "--batch-size", "4", "--instances",
            "p3.2xlarge", "--format", "json", "--db", db]  # fmt: skip
    assert main(argv) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert job["habits"] == "adamw (foreach)" and job["attention"] is None and job["optimizer"] == "adamw"
    assert main([*argv, "--attention", "eager"]) == 2
    captured = capsys.readouterr()
    assert "call scaled_dot_product_attention" in json.loads(captured.out)["error"]
    assert captured.err.count("\n") == 1
    recommend = ["recommend", "--model", model, "--input-shape", "32", "--batch-size", "4", "--epochs", "1",
                 "--dataset-images", "1000", "--budget-hours", "10", "--instances", "p3.2xlarge",
                 "--db", db]  # fmt: skip
    assert main([*recommend, "--attention", "eager"]) == 2
    assert "call scaled_dot_product_attention" in capsys.readouterr().err
    assert main([*recommend, "--format", "json"]) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert job["habits"] == "adamw (foreach)" and job["attention"] is None and job["memory_format"] is None
    # a transformer of the zoo still takes it, and says so
    assert Predictor("bert_tiny", 4, CATALOG, job=TrainingJob(attention="eager")).attends


def test_a_vision_transformer_takes_eager_attention_and_a_cnn_does_not(tmp_path):
    path = tmp_path / "vit.py"
    path.write_text(
        "import torch\nimport torch.nn.functional as F\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self, num_classes=10):\n"
        "        super().__init__()\n"
        "        self.patch = torch.nn.Conv2d(3, 64, 8, stride=8)\n"
        "        self.qkv = torch.nn.Linear(64, 192)\n"
        "        self.head = torch.nn.Linear(64, num_classes)\n\n"
        "    def forward(self, x):\n"
        "        x = self.patch(x).flatten(2).transpose(1, 2)\n"
        "        q, k, v = self.qkv(x).view(x.shape[0], -1, 3, 4, 16).permute(2, 0, 3, 1, 4)\n"
        "        x = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)\n"
        "        return self.head(x.mean(1))\n\n"
        "def make(num_classes=10):\n"
        "    return Net(num_classes)\n"
    )
    fused = Predictor(f"{path}:make", 4, CATALOG, input_shape=(3, 32, 32))
    eager = Predictor(f"{path}:make", 4, CATALOG, input_shape=(3, 32, 32), job=TrainingJob(attention="eager"))
    assert fused.attends and eager.attends
    assert eager.job.describe("image", "sgd", eager.attends) == "nchw, sgd (foreach), eager attention"
    assert eager.compute(A100).step_s > fused.compute(A100).step_s
    with pytest.raises(UsageError, match="--attention is for transformers"):
        Predictor("resnet18", 4, CATALOG, job=TrainingJob(attention="eager"))
