"""A model with frozen parameters (requires_grad=False, a fine-tuned head on a fixed backbone): predict gives
them no gradient, no all-reduce and no optimizer state, as PyTorch and DDP do. They were counted as trained:
a backbone of 1.6 B frozen weights under a small head was predicted at seconds of network per step and
gigabytes of gradients, and recommend called its profile hundreds of percent slower than it measured."""

from __future__ import annotations

import json
import textwrap

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.cli.main import main
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.step_cost import step_cost

BACKBONE = 4 * (2048 * 2048 + 2048)  # four frozen 2048-wide linear layers
HEAD = 2048 * 10 + 10


def _model_file(tmp_path, frozen: bool):
    path = tmp_path / ("frozen.py" if frozen else "trained.py")
    path.write_text(textwrap.dedent(f"""
        import torch

        def make(num_classes=10):
            backbone = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)])
            backbone.requires_grad_({not frozen})
            return torch.nn.Sequential(torch.nn.Flatten(), backbone, torch.nn.Linear(2048, num_classes))
    """))  # fmt: skip
    return f"{path}:make"


def test_the_step_counts_frozen_parameters_apart_and_memory_gives_them_no_gradient(tmp_path):
    cost = step_cost(_model_file(tmp_path, frozen=True), 8, (1, 1, 2048))
    assert cost.param_count == BACKBONE + HEAD and cost.param_tensors == 10
    assert (cost.frozen_count, cost.frozen_tensors) == (BACKBONE, 8)
    assert cost.trained_count == HEAD and cost.gradient_bytes == 4 * HEAD
    check = memory_check(cost, find_accelerator("A10G"), "fp32", "adamw")
    assert check.weights_gb == pytest.approx((BACKBONE + HEAD) * 4 / 2**30)
    assert check.optimizer_gb == pytest.approx(HEAD * 8 / 2**30)  # AdamW's moments of the head only


def _predicted(tmp_path, capsys, model: str) -> dict:
    status = main(["predict", "--model", model, "--batch-size", "8", "--input-shape", "1,1,2048",
                   "--instances", "p3.16xlarge", "--max-instances", "2", "--format", "json",
                   "--db", str(tmp_path / "x.duckdb")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    return {row["instance_count"]: row for row in json.loads(out)["predictions"]}


def test_a_frozen_backbone_is_not_all_reduced(tmp_path, capsys):
    frozen = _predicted(tmp_path, capsys, _model_file(tmp_path, frozen=True))
    trained = _predicted(tmp_path, capsys, _model_file(tmp_path, frozen=False))
    # 16.8 M trained parameters take tens of milliseconds over 2 machines' network; 20 k take the links'
    # latency (both were the former, as were the interconnect's times).
    assert trained[2]["network_s"] > 10 * frozen[2]["network_s"]
    assert trained[1]["interconnect_s"] > 5 * frozen[1]["interconnect_s"]
    assert frozen[2]["compute_s"] < trained[2]["compute_s"]  # no weight gradients, no optimizer step
