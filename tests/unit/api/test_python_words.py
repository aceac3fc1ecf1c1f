"""The Python API names its own arguments where a command names its options: "--batch-size is required
with --model" and "raise --budget-hours" read as a command line to a caller of stash_core."""

from __future__ import annotations

import pytest

import stash_core as stash


def test_a_missing_batch_size_is_named_as_the_argument(tmp_path):
    with pytest.raises(stash.UsageError, match=r"^batch_size is required with model$"):
        stash.predict(model="resnet50", db=tmp_path / "x.duckdb")


def test_an_unreachable_budget_names_the_arguments_that_would_reach_it(tmp_path):
    answer = stash.recommend("resnet50", 64, 90, 1_281_167, budget_hours=0.001, instances="p3.2xlarge",
                             db=tmp_path / "x.duckdb")  # fmt: skip
    assert answer.best is None and "raise budget_hours or allow more instances (max_instances)" in (
        answer.infeasible_reason
    )
    assert "--" not in answer.infeasible_reason
