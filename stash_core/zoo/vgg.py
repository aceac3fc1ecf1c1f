"""VGG without batch norm in torchvision's layout: conv features, AdaptiveAvgPool2d(7x7), 4096-4096 head."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from stash_core.zoo.meta import is_meta

# Output channels of each 3x3 conv; "M" is a 2x2 max pool. Configurations A, B, D, E of the VGG paper.
VGG_CONFIGS: dict[str, list[int | str]] = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [
        64,
        64,
        "M",
        128,
        128,
        "M",
        256,
        256,
        256,
        256,
        "M",
        512,
        512,
        512,
        512,
        "M",
        512,
        512,
        512,
        512,
        "M",
    ],
}


def _features(config: list[int | str], in_channels: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    channels = in_channels
    for item in config:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers += [nn.Conv2d(channels, int(item), kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            channels = int(item)
    return nn.Sequential(*layers)


class VGG(nn.Module):
    def __init__(self, config: list[int | str], num_classes: int = 1000, in_channels: int = 3):
        super().__init__()
        self.features = _features(config, in_channels)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, num_classes),
        )
        for module in () if is_meta(self) else self.modules():  # torchvision's initialisation
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                nn.init.constant_(module.bias, 0)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.constant_(module.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def vgg_factory(name: str) -> Callable[..., VGG]:
    config = VGG_CONFIGS[name]

    def make(num_classes: int = 1000, in_channels: int = 3) -> VGG:
        return VGG(config, num_classes=num_classes, in_channels=in_channels)

    return make
