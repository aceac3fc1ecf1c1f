"""Models from the ecosystem in Stash's own timed loop: outputs that are dataclasses or dicts with `logits` or
`loss` (as Hugging Face's ModelOutput), and the vocabulary size in `model.config.vocab_size`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from stash_core.errors import UsageError
from stash_core.measure.timed_loop import StepTimes, make_clock, run_steps
from stash_core.zoo import build_model, loss_fn, synthetic_batch

MODELS = """
from dataclasses import dataclass
import torch
from torch import nn

@dataclass
class Config:
    vocab_size: int = 97
    num_labels: int = 3

@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None

class FakeBert(nn.Module):
    def __init__(self, as_dict=False):
        super().__init__()
        self.config, self.as_dict = Config(), as_dict
        self.embed = nn.Embedding(self.config.vocab_size, 8)
        self.head = nn.Linear(8, self.config.num_labels)
    def forward(self, input_ids):
        logits = self.head(self.embed(input_ids).mean(1))
        return {"logits": logits} if self.as_dict else SequenceClassifierOutput(logits=logits)

class LossOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)
    def forward(self, x):
        return SequenceClassifierOutput(loss=self.layer(x.flatten(1)[:, :4]).pow(2).mean())

class Nothing(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)
    def forward(self, x):
        return ("no", "logits")

def dataclass_output():
    return FakeBert()

def dict_output():
    return FakeBert(as_dict=True)

def loss_only():
    return LossOnly()

def nothing():
    return Nothing()
"""


@pytest.fixture()
def models(tmp_path: Path) -> Path:
    path = tmp_path / "hf_like.py"
    path.write_text(MODELS)
    return path


def steps(model: nn.Module, info, count: int = 3) -> StepTimes:
    times = StepTimes()
    batches = iter([synthetic_batch(info, 4, torch.device("cpu"))] * count)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cpu = torch.device("cpu")
    run_steps(model, optimizer, loss_fn(info), batches, cpu, count, times, make_clock(cpu))
    return times


@pytest.mark.parametrize("factory", ["dataclass_output", "dict_output"])
def test_an_output_with_logits_and_the_configs_vocabulary_work_without_a_wrapper(models, factory) -> None:
    model, info = build_model(f"{models}:{factory}", input_shape=(16,))
    assert (info.kind, info.vocab_size, info.num_classes) == ("tokens", 97, 3)
    batch, _ = synthetic_batch(info, 64, torch.device("cpu"))
    assert int(batch.max()) < 97  # ids within the model's own vocabulary, not the 30522 default
    assert len(steps(model, info)) == 3


def test_an_output_with_only_a_loss_trains_on_that_loss(models) -> None:
    model, info = build_model(f"{models}:loss_only", input_shape=(3, 8, 8), num_classes=2)
    before = model.layer.weight.detach().clone()
    assert len(steps(model, info)) == 3
    assert not torch.equal(before, model.layer.weight)


def test_an_output_with_neither_is_refused_by_name(models) -> None:
    with pytest.raises(UsageError, match="with .logits or .loss.*returned a tuple"):
        build_model(f"{models}:nothing", input_shape=(3, 8, 8))
