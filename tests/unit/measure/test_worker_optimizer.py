"""The profiled step trains with the optimizer `stash predict` counts for the model."""

from __future__ import annotations

import torch

from stash_core.measure.worker import training_optimizer
from stash_core.zoo import build_model


def test_token_models_train_with_adamw_and_image_models_with_sgd_momentum():
    decoder, info = build_model("bert_tiny")
    assert info.kind == "tokens"
    assert isinstance(training_optimizer(decoder, info.kind), torch.optim.AdamW)
    net, info = build_model("resnet10", num_classes=10, input_shape=(3, 32, 32))
    optimizer = training_optimizer(net, info.kind)
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["momentum"] == 0.9
