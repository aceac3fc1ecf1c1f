"""Token models in the compute model: BERT's FLOPs at a sequence length, and its published figures."""

import pytest

from stash_core.decide.predict.configuration import Predictor
from stash_core.decide.predict.published import load_published
from stash_core.decide.predict.stated_error import expected_error
from stash_core.decide.predict.step_cost import step_cost
from stash_core.errors import UsageError


def _encoder_forward_flops(layers, hidden, seq_len):
    # Per layer: q/k/v, output and feed-forward products (12 H^2 a token) and attention (2 S^2 H), x 2 FLOPs;
    # plus the pooler on the first token. Embeddings and the 2-class head are lookups or negligible.
    return 2 * (layers * (12 * hidden * hidden * seq_len + 2 * seq_len * seq_len * hidden) + hidden * hidden)


def test_bert_base_flops_follow_the_sequence_length():
    default = step_cost("bert_base", 2)
    assert default.input_shape == (128,)
    assert default.forward_flops / 2 == pytest.approx(_encoder_forward_flops(12, 768, 128), rel=0.002)
    long = step_cost("bert_base", 2, (384,))
    assert long.input_shape == (384,)
    assert long.forward_flops / 2 == pytest.approx(_encoder_forward_flops(12, 768, 384), rel=0.002)
    assert long.activation_bytes > 2.9 * default.activation_bytes  # activations grow at least with tokens
    assert long.param_count == default.param_count == 109_483_778


def test_a_shape_the_model_cannot_take_is_a_usage_error():
    with pytest.raises(UsageError, match="one sequence length"):
        step_cost("bert_tiny", 2, (3, 224, 224))
    with pytest.raises(UsageError, match="at most 512"):
        step_cost("bert_tiny", 2, (1024,))
    with pytest.raises(UsageError, match="C,H,W"):
        step_cost("resnet18", 2, (128,))


def test_published_bert_figures_carry_their_sequence_length_source_and_table():
    bert = [point for point in load_published(count=False).points if point.model.startswith("bert")]
    assert len(bert) >= 8
    assert (384,) in {point.input_shape for point in bert}
    assert all(len(point.input_shape) == 1 and point.input_shape[0] <= 512 for point in bert)
    assert all(point.source and point.source_id for point in bert)
    assert len({point.source_id for point in bert}) >= 2
    # Every path has a stated error, the same for every model (it is per path and batch regime).
    assert expected_error("roofline", "bert_large") is not None
    assert expected_error("roofline", "bert_tiny") == expected_error("roofline")


def test_a_profile_at_another_sequence_length_does_not_anchor_the_prediction():
    catalog = {
        "t4box": {"accelerator": "NVIDIA T4", "accelerator_count": 1, "interconnect": "none"},
        "a10g": {"accelerator": "NVIDIA A10G", "accelerator_count": 1, "interconnect": "none"},
    }
    profile = {"run_id": "r128", "model": "bert_tiny", "batch_size": 4, "instance": "t4box", "compute_s": 0.5,
               "input_shape": None}  # fmt: skip
    at_default = Predictor("bert_tiny", 4, catalog, [profile]).predict("a10g", 1, 1)
    assert at_default.path == "scaled" and "r128" in at_default.basis
    at_256 = Predictor("bert_tiny", 4, catalog, [profile], input_shape=(256,)).predict("a10g", 1, 1)
    assert at_256.path == "roofline"
    profile_256 = {**profile, "run_id": "r256", "input_shape": "[256]"}
    anchored = Predictor("bert_tiny", 4, catalog, [profile, profile_256], input_shape=(256,))
    assert anchored.predict("t4box", 1, 1).path == "measured"
    assert "r256" in anchored.predict("a10g", 1, 1).basis
