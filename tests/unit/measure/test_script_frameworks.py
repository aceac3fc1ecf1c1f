"""Scripts written for a framework's trainer, run unmodified by the entry point: a Hugging Face Trainer on a
BERT built from a config (no weights, no network) and a Lightning Trainer. Skipped, with the reason, where
the package is not installed (neither is a requirement of Stash)."""

from __future__ import annotations

import pytest
from test_script_entry import run_entry

pytestmark = pytest.mark.launches  # every test here starts real measuring processes

HF_TRAINER = """
import sys, torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

class Sentences(torch.utils.data.Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return {"input_ids": torch.randint(0, 500, (16,), generator=generator),
                "attention_mask": torch.ones(16, dtype=torch.long), "labels": torch.tensor(index % 2)}

config = BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, num_labels=2)
args = TrainingArguments(output_dir=sys.argv[1], max_steps=1000, per_device_train_batch_size=8,
                         gradient_accumulation_steps=2, report_to=[], save_strategy="no",
                         logging_strategy="no", use_cpu=True, dataloader_num_workers=0,
                         disable_tqdm=True)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Sentences()).train()
"""

LIGHTNING = """
import torch
import lightning as L

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    def training_step(self, batch, index):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

data = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
trainer = L.Trainer(max_steps=1000, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=16, shuffle=True))
"""


def test_a_hugging_face_trainer_script(tmp_path) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate, which is not installed")
    status, messages, stderr = run_entry(tmp_path, HF_TRAINER, [str(tmp_path / "out")], iterations=10)
    assert status == 0, stderr[-3000:]
    result = messages["RESULT"]
    assert result["stop_reason"] == "fixed" and len(result["samples"]["iteration_s"]) == 10
    script = result["script"]
    assert script["loader_used"] and script["batch_size"] == 8  # replayed through accelerate's loader
    assert script["split"].startswith("data wait, forward") and min(result["samples"]["forward_s"]) > 0


def test_a_lightning_script_whose_optimizer_step_runs_forward_and_backward(tmp_path) -> None:
    pytest.importorskip("lightning", reason="lightning is not installed")
    status, messages, stderr = run_entry(tmp_path, LIGHTNING, iterations=10)
    assert status == 0, stderr[-3000:]
    result = messages["RESULT"]
    assert result["stop_reason"] == "fixed" and len(result["samples"]["iteration_s"]) == 10
    assert result["script"]["loader_used"] and result["script"]["batch_size"] == 16
    # Lightning steps the optimizer with a closure that runs forward and backward inside optimizer.step():
    # the step's own time cannot be told apart, so it is reported within backward_s.
    assert "closure" in result["script"]["split"] and "optimizer_s" not in result["samples"]
    samples = result["samples"]
    for index, total_s in enumerate(samples["iteration_s"]):
        parts_s = [samples[part][index] for part in ("data_s", "forward_s", "backward_s")]
        assert min(parts_s) >= 0 and abs(sum(parts_s) - total_s) < 1e-9
