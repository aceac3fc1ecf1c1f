"""A job trains with one optimizer per model kind, the same in the profiled step and in the prediction."""

from __future__ import annotations

import torch

from stash_core.decide.predict.features import default_optimizer
from stash_core.decide.predict.step_cost import step_cost
from stash_core.zoo import build_model, make_optimizer, optimizer_name


def test_token_models_train_with_adamw_and_image_models_with_sgd_momentum():
    encoder, info = build_model("bert_tiny")
    assert info.kind == "tokens" and optimizer_name(info.kind) == "adamw"
    assert isinstance(make_optimizer(encoder, info.kind), torch.optim.AdamW)
    net, info = build_model("resnet10", num_classes=10, input_shape=(3, 32, 32))
    optimizer = make_optimizer(net, info.kind)
    assert optimizer_name(info.kind) == "sgd"
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["momentum"] == 0.9


def test_the_prediction_counts_the_optimizer_the_profile_trains_with():
    assert default_optimizer(step_cost("bert_tiny", 4)) == "adamw"
    assert default_optimizer(step_cost("resnet18", 2, (3, 32, 32))) == "sgd"
