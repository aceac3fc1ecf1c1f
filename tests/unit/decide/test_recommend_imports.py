"""A recommendation over steps already counted imports no torch (seconds on a small machine), as a prediction
does not: the model's kind, input shape and zoo membership are read without the zoo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# In a fresh interpreter: this test process has torch loaded already.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from stash_core.decide.recommend import recommend

    answer = recommend(sys.argv[1], model=sys.argv[2], batch_size=32, epochs=1, dataset_images=100_000,
                       budget_hours=10, input_shape=json.loads(sys.argv[3]))
    print(json.dumps({"torch": "torch" in sys.modules, "shape": answer.request["input_shape"],
                      "options": len(answer.options)}))
    """
)


def _recommend(tmp_path: Path, model: str, shape: list[int] | None) -> dict:
    env = {**os.environ, "STASH_CACHE_DIR": str(tmp_path / "steps")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "r.duckdb"), model, json.dumps(shape)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _recommend_here(tmp_path: Path, model: str, shape: list[int] | None, monkeypatch) -> dict:
    """The first recommendation, in this process (torch is loaded here already): it counts the steps, and
    writes them to this test's cache folder (not taken from this process's memory of an earlier test)."""
    from stash_core.decide.predict import step_cost as step_cost_module
    from stash_core.decide.recommend import recommend

    for memo in (step_cost_module._traced, step_cost_module._cached_step_cost,
                 step_cost_module._default_input_shape):  # fmt: skip
        memo.cache_clear()

    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "steps"))
    answer = recommend(str(tmp_path / "r.duckdb"), model=model, batch_size=32, epochs=1,
                       dataset_images=100_000, budget_hours=10, input_shape=shape)  # fmt: skip
    return {"shape": answer.request["input_shape"], "options": len(answer.options)}


def test_a_second_recommendation_over_counted_steps_imports_no_torch(tmp_path, monkeypatch):
    for model, shape, expected in (("resnet18", [3, 64, 64], [3, 64, 64]), ("gpt2_tiny", None, None)):
        first = _recommend_here(tmp_path, model, shape, monkeypatch)
        second = _recommend(tmp_path, model, shape)  # a fresh interpreter, over the counted step
        assert second == {**first, "torch": False}
        assert expected is None or second["shape"] == expected
