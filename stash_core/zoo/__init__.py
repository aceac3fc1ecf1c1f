"""Model zoo: torchvision-identical CNNs and BERT-style encoders in plain torch, plus user models.

model, info = build_model("resnet50")                       # zoo name, 1000 classes, 3x224x224
model, info = build_model("examples/models/tiny_cnn.py:make", num_classes=10, input_shape=(3, 32, 32))
model, info = build_model("mypackage.models:make_net")      # importable module
inputs, targets = synthetic_batch(info, batch_size=32, device="cuda")
loss = loss_fn(info)(model(inputs), targets)
"""

# The one parser of an input shape is the spec's (bounded, a list), named here too for scripts that build a
# zoo model from a command line's text.
from stash_core.spec_parse import parse_input_shape
from stash_core.zoo.batches import loss_fn, make_optimizer, optimizer_name, synthetic_batch
from stash_core.zoo.build import (
    DEFAULT_IMAGE_CLASSES,
    DEFAULT_IMAGE_SHAPE,
    DEFAULT_SEQ_LEN,
    DEFAULT_TOKEN_CLASSES,
    DEFAULT_VOCAB_SIZE,
    build_model,
    describe_model,
    list_models,
)
from stash_core.zoo.info import ModelInfo

__all__ = [
    "DEFAULT_IMAGE_CLASSES",
    "DEFAULT_IMAGE_SHAPE",
    "DEFAULT_SEQ_LEN",
    "DEFAULT_TOKEN_CLASSES",
    "DEFAULT_VOCAB_SIZE",
    "ModelInfo",
    "build_model",
    "describe_model",
    "list_models",
    "loss_fn",
    "make_optimizer",
    "optimizer_name",
    "parse_input_shape",
    "synthetic_batch",
]
