"""The zoo: model names and how to build each one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from stash_core.zoo.decoder import DECODERS, decoder_factory
from stash_core.zoo.resnet import RESNET_LAYOUTS, resnet_factory
from stash_core.zoo.small_nets import AlexNet, MobileNetV2, SqueezeNet, shufflenet_factory
from stash_core.zoo.transformer import BERT_SIZES, MAX_POSITIONS, VOCAB_SIZE, bert_factory
from stash_core.zoo.vgg import VGG_CONFIGS, vgg_factory


@dataclass(frozen=True)
class ZooEntry:
    kind: str  # "image": factory(num_classes, in_channels); "tokens": factory(num_classes)
    factory: Callable[..., nn.Module]
    vocab_size: int | None = None
    max_seq_len: int | None = None
    # Smallest image height/width that survives the downsampling; every zoo CNN ends in an adaptive pool,
    # so any size from here up works. Checked by forwards in tests/unit/test_zoo.py.
    min_image_side: int = 1
    default_seq_len: int | None = None  # a token model's default input shape (else DEFAULT_SEQ_LEN)
    causal_lm: bool = False  # predicts the next token over its vocabulary: it has no classes to choose


def _entries() -> dict[str, ZooEntry]:
    entries: dict[str, ZooEntry] = {}
    for name in RESNET_LAYOUTS:
        entries[name] = ZooEntry("image", resnet_factory(name))
    for name in VGG_CONFIGS:
        entries[name] = ZooEntry("image", vgg_factory(name), min_image_side=32)  # five 2x2 max pools
    entries["alexnet"] = ZooEntry("image", AlexNet, min_image_side=63)
    entries["mobilenet_v2"] = ZooEntry("image", MobileNetV2)
    entries["shufflenet_v2_x0_5"] = ZooEntry("image", shufflenet_factory("x0_5"))
    entries["shufflenet_v2_x1_0"] = ZooEntry("image", shufflenet_factory("x1_0"))
    entries["shufflenet_v2"] = entries["shufflenet_v2_x1_0"]  # the usual meaning of the bare name
    entries["squeezenet1_0"] = ZooEntry("image", SqueezeNet, min_image_side=21)
    for name in BERT_SIZES:
        entries[name] = ZooEntry(
            "tokens", bert_factory(name), vocab_size=VOCAB_SIZE, max_seq_len=MAX_POSITIONS
        )
    for name, config in DECODERS.items():
        entries[name] = ZooEntry(
            "tokens",
            decoder_factory(name),
            vocab_size=config.vocab_size,
            # learned positions stop at the context; rotary ones do not
            max_seq_len=config.context if config.style == "gpt2" else None,
            default_seq_len=config.context,
            causal_lm=True,
        )
    return entries


ZOO: dict[str, ZooEntry] = _entries()
