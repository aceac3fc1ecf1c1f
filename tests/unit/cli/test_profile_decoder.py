"""`stash profile` of a decoder-only language model on the CPU: the zoo's causal models train in a real
torchrun worker (causal SDPA, rotary positions, grouped-query attention, their own next-token loss)."""

from __future__ import annotations

import json

import pytest
from support import stash_main


@pytest.mark.launches
@pytest.mark.slow
def test_a_llama_style_model_profiles_on_the_cpu(tmp_path):
    db, out = tmp_path / "lm.duckdb", tmp_path / "run.json"
    result = stash_main(  # main() in this process; the torchrun worker is a real process
        "profile", "--model", "llama_tiny", "--batch-size", "2", "--input-shape", "64", "--stalls", "compute",
        "--iterations", "3", "--device", "cpu", "--no-probes", "--progress", "none", "--db", str(db),
        "--out", str(out), env_extra={"STASH_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["model"]["name"] == "llama_tiny" and doc["model"]["input_shape"] == [64]
    assert doc["model"]["num_classes"] == doc["model"]["vocab_size"] == 32000
    compute = doc["breakdown"]["stalls"]["compute"]
    assert compute["status"] == "measured" and compute["seconds"] > 0
