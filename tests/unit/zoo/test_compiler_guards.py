"""The compiler's stand-in (zoo/compiler_guards.py) trains as the real compiler does, bit for bit, without
importing it; what the stand-in cannot serve (a module of the compiler, torch.compile) gets the real one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import REPO

# In a new interpreter (this test process may hold the compiler already): a gloo group of one, DDP over it and
# both of Stash's optimizers, a few steps each, inside the stand-in's block (or with the compiler loaded
# first: "real"); every import of the compiler's package is logged. Then, in a second block, a forward
# that imports one of the compiler's modules and a torch.compile call.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    imports = []

    class Log:  # asked only for a module not loaded yet: a real import of the compiler
        def find_spec(self, name, path, target=None):
            if name == "torch._dynamo":
                imports.append(len(imports))
            return None

    sys.meta_path.insert(0, Log())
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from stash_core.zoo.compiler_guards import compiler_unimported

    if sys.argv[1] == "real":
        import torch._dynamo
    answer = {}
    with compiler_unimported():
        dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
        for name in ("sgd", "adamw"):
            torch.manual_seed(0)
            model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                                                torch.nn.Linear(16, 3)))
            if name == "sgd":
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            else:
                optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
            for _ in range(4):
                optimizer.zero_grad()
                logits, labels = model(torch.randn(5, 8)), torch.tensor([0, 1, 2, 0, 1])
                loss = torch.nn.functional.cross_entropy(logits, labels)
                loss.backward()
                optimizer.step()
            answer[name] = [p.detach().flatten().tolist() for p in model.parameters()]
        answer["real_imports_inside"] = len(imports)
    # (not hasattr: torch would import the compiler to answer it)
    answer["left_behind"] = "torch._dynamo" in sys.modules or "_dynamo" in vars(torch)
    if sys.argv[1] != "real":
        with compiler_unimported():
            import torch._dynamo.external_utils as external_utils
            answer["module_is_the_loaded_one"] = (
                sys.modules["torch._dynamo.external_utils"] is external_utils is torch._dynamo.external_utils
            )
            from torch._dynamo import config
            answer["config_is_the_loaded_one"] = config is sys.modules["torch._dynamo.config"]
            answer["real_after_module"] = getattr(sys.modules["torch._dynamo"], "__file__", None) is not None
            x = torch.arange(4.0)
            answer["compiled"] = torch.compile(lambda t: t * 2 + 1, backend="eager")(x).tolist()
        answer["real_imports_in_all"] = len(imports)
    print(json.dumps(answer))
    """
)


def _train(mode: str, tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(tmp_path / f"{mode}.store")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # two new interpreters
def test_the_stand_in_trains_as_the_compiler_does_without_it_and_hands_over_what_it_cannot_serve(tmp_path):
    served, real = _train("stand-in", tmp_path), _train("real", tmp_path)
    assert served["sgd"] == real["sgd"] and served["adamw"] == real["adamw"]  # bit for bit
    assert served["real_imports_inside"] == 0  # the group, DDP, zero_grad, step: all served
    assert real["real_imports_inside"] == 1
    assert served["left_behind"] is False and real["left_behind"] is True  # the stand-in gone with its block
    # a module of the compiler, asked for through the stand-in: the real compiler's own module, loaded once
    assert served["module_is_the_loaded_one"] and served["config_is_the_loaded_one"]
    assert served["real_after_module"] and served["real_imports_in_all"] == 1
    assert served["compiled"] == [1.0, 3.0, 5.0, 7.0]
