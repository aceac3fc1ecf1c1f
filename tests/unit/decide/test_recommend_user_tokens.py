"""recommend for a user's token model (a file whose factory takes ids, given a one-number --input-shape): the
job was restated as an image model's (NCHW, SGD) because its kind came from building the model at the
default image shape, and a token model built in bfloat16 was refused outright ("Stash's image batches are
float32"), although predict answered for both."""

from __future__ import annotations

import textwrap

from stash_core.decide.recommend import recommend

LANGUAGE_MODEL = """
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = nn.Embedding(1000, 64), nn.Linear(64, 10)
        def forward(self, ids):
            return self.head(self.embed(ids).mean(1)).float()

    def fp32():
        return LM()

    def bf16():
        return LM().to(torch.bfloat16)
"""


def _recommended(tmp_path, factory: str):
    path = tmp_path / "lm.py"
    path.write_text(textwrap.dedent(LANGUAGE_MODEL))
    return recommend(
        tmp_path / "r.duckdb", f"{path}:{factory}", 8, 1, 10_000, budget_hours=100, instances=["g5.xlarge"],
        input_shape=(32,),
    ).to_json()  # fmt: skip


def test_a_user_token_model_is_recommended_as_the_token_model_it_is(tmp_path):
    job = _recommended(tmp_path, "fp32")["job"]
    assert job["optimizer"] == "adamw" and job["input_shape"] == [32] and job["precision"] == "fp32"
    assert "sgd" not in job["habits"]


def test_a_token_model_built_in_bfloat16_is_recommended_in_its_own_precision(tmp_path):
    answer = _recommended(tmp_path, "bf16")
    assert answer["job"]["precision"] == "16-bit weights (the model's own)"
    assert answer["recommended"]["source"] == "predicted"


def test_a_bfloat16_models_profile_stands_for_it_whatever_precision_is_asked(tmp_path):
    # --precision amp set its profile aside ("it ran in fp32 and the job trains in amp"), though it
    # trained in its own bfloat16 as the job does
    from result_docs import result_doc

    from stash_core.catalog import add_instance
    from stash_core.store import ingest_result

    path = tmp_path / "lm.py"
    path.write_text(textwrap.dedent(LANGUAGE_MODEL))
    db = tmp_path / "r.duckdb"
    add_instance(db, name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10, on_demand_usd_per_h=0.2)
    ingest_result(db, result_doc(f"{path}:bf16", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12},
                                 spec_extra={"input_shape": [32]}))  # fmt: skip
    for precision in ("fp32", "amp"):
        answer = recommend(
            db, f"{path}:bf16", 8, 1, 10_000, budget_hours=100, instances=["cpu4"], input_shape=(32,),
            precision=precision,
        ).to_json()  # fmt: skip
        assert answer["job"]["precision"] == "16-bit weights (the model's own)"
        one = next(option for option in answer["options"] if option["config"].startswith("1 x cpu4"))
        assert one["source"] == "measured", answer


def test_a_model_that_fails_on_its_input_shape_is_one_error_as_predict_says_it(tmp_path):
    """An LSTM given the default image shape raised in its own forward: predict said so in one line,
    recommend answered "nothing could be evaluated" with that reason repeated for every instance."""
    from pathlib import Path

    import pytest

    from stash_core.decide.predict import predict_instances
    from stash_core.errors import UsageError

    model = f"{Path(__file__).resolve().parents[3] / 'examples' / 'models' / 'recurrent.py'}:lstm"
    db, two = tmp_path / "r.duckdb", ["g5.xlarge", "p3.2xlarge"]
    with pytest.raises(UsageError, match="fails on input shape 3,224,224") as said_by_predict:
        predict_instances(db, model, 8, instances=two)
    with pytest.raises(UsageError, match="fails on input shape 3,224,224") as said_by_recommend:
        recommend(db, model, 8, 1, 10_000, budget_hours=100, instances=two)
    assert str(said_by_recommend.value) == str(said_by_predict.value)
