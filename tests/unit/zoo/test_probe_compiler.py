"""The meta-device probe of a user model, and the description of a zoo model (`stash models`), leave torch's
compiler unimported and answer as they do with the compiler loaded; a model that reaches for the compiler
itself is still probed on the meta device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import REPO, TINY_CNN

# A model whose forward imports part of the compiler: the stand-in cannot serve it, the probe must not fail.
REACHES = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.head = torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 7)

    def forward(self, x):
        import torch._dynamo.external_utils  # noqa: F401
        return self.head(self.norm(x.flatten(1)))

def make():
    return Net()
"""

# In a new interpreter, where nothing has imported the compiler yet: each model probed cold, then again with
# the compiler loaded (the probe as it was before the stand-in); the ModelInfo of both and what was imported.
CHECK = """
import dataclasses, json, sys
from stash_core.zoo import build_model, describe_model
cases = [(sys.argv[1], None, (3, 32, 32)), (sys.argv[2], None, (1, 2, 2))]
cold = [dataclasses.asdict(build_model(ref, classes, shape)[1]) for ref, classes, shape in cases[:1]]
compiler_after_cold = "torch._dynamo" in sys.modules
described_cold = dataclasses.asdict(describe_model("bert_tiny"))  # embeddings initialised on the meta device
compiler_after_describe = "torch._dynamo" in sys.modules
cold += [dataclasses.asdict(build_model(ref, classes, shape)[1]) for ref, classes, shape in cases[1:]]
import torch._dynamo  # noqa: E402,F401
loaded = [dataclasses.asdict(build_model(ref, classes, shape)[1]) for ref, classes, shape in cases]
described_loaded = dataclasses.asdict(describe_model("bert_tiny"))
print(json.dumps({"cold": cold, "loaded": loaded, "compiler_after_cold": compiler_after_cold,
                  "compiler_after_describe": compiler_after_describe, "described_cold": described_cold,
                  "described_loaded": described_loaded}, default=str))
"""


@pytest.mark.slow  # a new interpreter
def test_the_probe_imports_no_compiler_and_answers_as_with_it(tmp_path: Path) -> None:
    reaches = tmp_path / "reaches.py"
    reaches.write_text(textwrap.dedent(REACHES))
    done = subprocess.run(
        [sys.executable, "-c", CHECK, TINY_CNN, f"{reaches}:make"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["compiler_after_cold"] is False  # tiny_cnn has batch norm: its meta kernel is guarded
    assert found["cold"] == found["loaded"]
    assert found["compiler_after_describe"] is False  # a zoo model described on the meta device: neither
    assert found["described_cold"] == found["described_loaded"]
    assert [info["num_classes"] for info in found["cold"]] == [10, 7]  # tiny_cnn keeps its default classes
