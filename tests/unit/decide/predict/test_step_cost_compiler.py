"""Counting a step, a decoder's default input and its size check import no compiler of torch's; the counts are
the same, and the compiler is usable after."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

# In a fresh interpreter: the compiler's import is what is avoided, and this test process may hold it.
SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch._refs import add
    from stash_core.decide.predict.step_cost import default_input_shape, step_cost

    def guard_cached(function):
        while function is not None:
            if "__dynamo_disable" in getattr(function, "__dict__", {}):
                return True
            function = getattr(function, "__wrapped__", None)
        return False

    cost = step_cost("resnet18", 4, (3, 32, 32))  # batch norm and the loss decompose on the meta device
    print("decoder input:", default_input_shape("gpt2"))  # its embedding initialises through a guard
    from stash_core.zoo import build_model
    build_model("llama_tiny", input_shape=(64,))  # on the CPU, after a check of its size built on meta
    print("compiler loaded after counting:", "torch._dynamo" in sys.modules)
    print("guard left cached:", guard_cached(add))
    print("ops", len(cost.ops), "flops", cost.total_flops)
    compiled = torch.compile(lambda x: x * 2, backend="eager")
    print("compiled:", compiled(torch.ones(2)).tolist(), "compiler loaded:", "torch._dynamo" in sys.modules)
    """
)


def _run(script: str, tmp_path: Path) -> str:
    env = {"PYTHONPATH": str(REPO), "STASH_CACHE_DIR": str(tmp_path / "steps"), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # two new interpreters
def test_counting_leaves_the_compiler_unimported_counts_the_same_and_compiles_after(tmp_path):
    fresh = _run(SCRIPT, tmp_path / "fresh")
    assert "compiler loaded after counting: False" in fresh
    assert "guard left cached: False" in fresh
    assert "decoder input: (1024,)" in fresh
    assert "compiled: [2.0, 2.0] compiler loaded: True" in fresh
    loaded = _run("import torch._dynamo\n" + SCRIPT, tmp_path / "loaded")
    assert "guard left cached: True" in loaded  # the real compiler guards (and caches) as usual
    counts = [[text for text in out.splitlines() if text.startswith("ops ")] for out in (fresh, loaded)]
    assert counts[0] and counts[0] == counts[1]
