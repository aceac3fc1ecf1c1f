"""One campaign of image and token models with input shapes of their own: `--input-shape` given twice, an
image shape and a sequence length, each model taking the one of its kind (one shape was given to every model,
so a campaign of resnet10 and bert_tiny could not set either's)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from result_docs import result_doc

from stash_core.campaign.plan import CampaignSettings, plan_campaign, profile_spec, split_done
from stash_core.campaign.shapes import shape_for, shapes_text
from stash_core.errors import UsageError
from stash_core.store import ingest_result


def test_each_model_is_profiled_with_the_shape_of_its_kind(tmp_path) -> None:
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", input_shape=shapes_text(["64", "3,32,32"]))
    image, token = plan_campaign(["resnet10", "bert_tiny"], [8], [2], [1], instance="lab")
    assert profile_spec(image, settings).input_shape == [3, 32, 32]
    assert profile_spec(token, settings).input_shape == [64]
    alone = replace(settings, input_shape=shapes_text(["3,32,32"]))  # one shape: every model's, as before
    assert shape_for("bert_tiny", alone.input_shape) == (3, 32, 32)


def test_a_stored_run_covers_a_model_when_its_shape_is_the_one_of_its_kind(tmp_path) -> None:
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", input_shape=shapes_text(["3,32,32", "64"]))
    plan = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")
    ingest_result(settings.db_path, result_doc("resnet10", batch_size=8, workers=2, instance="lab",
                                               stalls={"compute": 0.2, "interconnect": 0.05},
                                               spec_extra={"input_shape": [3, 32, 32]}))  # fmt: skip
    assert split_done(plan, settings) == ([], plan)
    other = replace(settings, input_shape=shapes_text(["3,16,16", "64"]))
    assert split_done(plan, other) == (plan, [])


@pytest.mark.parametrize("given", [["3,32,32", "3,16,16"], ["64", "128"], ["3,32,32", "64", "128"]])
def test_two_shapes_of_one_kind_are_refused(given) -> None:
    with pytest.raises(UsageError, match="one C,H,W for image models and one sequence length"):
        shapes_text(given)


def test_the_command_plans_both_kinds_and_refuses_one_shape_for_both(tmp_path, capsys) -> None:
    from stash_core.cli.main import main

    common = ["campaign", "--models", "resnet10,bert_tiny", "--batch-sizes", "8", "--dry-run", "--db",
              str(tmp_path / "c.duckdb")]  # fmt: skip
    assert main([*common, "--input-shape", "3,32,32", "--input-shape", "64"]) == 0
    out = capsys.readouterr().out
    assert "2 to run" in out
    # which of the two shapes each model gets (it printed only "resnet10 batch 8, 2 worker(s)")
    assert "resnet10 batch 8, 2 worker(s) input 3,32,32  [" in out
    assert "bert_tiny batch 8, 2 worker(s) input 64  [" in out
    assert main([*common, "--input-shape", "3,32,32"]) == 2
    assert "bert_tiny takes token ids" in capsys.readouterr().err
