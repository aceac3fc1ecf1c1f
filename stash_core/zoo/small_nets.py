"""AlexNet, MobileNetV2, ShuffleNetV2 (x0.5, x1.0) and SqueezeNet 1.0, each as torchvision defines it."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from stash_core.zoo.meta import is_meta


class AlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# --- MobileNetV2 -------------------------------------------------------------------------------------------


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels to a multiple of divisor without going more than 10% below value (torchvision rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn_relu6(
    in_ch: int, out_ch: int, kernel_size: int = 3, stride: int = 1, groups: int = 1
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel_size, stride, (kernel_size - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU6(inplace=True),
    )


class InvertedResidualV2(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn_relu6(inp, hidden_dim, kernel_size=1))
        layers += [
            _conv_bn_relu6(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    # expansion t, output channels c, repeats n, first stride s
    SETTING = [
        [1, 16, 1, 1],
        [6, 24, 2, 2],
        [6, 32, 3, 2],
        [6, 64, 4, 2],
        [6, 96, 3, 1],
        [6, 160, 3, 2],
        [6, 320, 1, 1],
    ]

    def __init__(
        self, num_classes: int = 1000, in_channels: int = 3, width_mult: float = 1.0, dropout: float = 0.2
    ):
        super().__init__()
        input_channel = _make_divisible(32 * width_mult)
        last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [_conv_bn_relu6(in_channels, input_channel, stride=2)]
        for t, c, n, s in self.SETTING:
            output_channel = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidualV2(input_channel, output_channel, s if i == 0 else 1, t))
                input_channel = output_channel
        features.append(_conv_bn_relu6(input_channel, last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(last_channel, num_classes))
        for module in () if is_meta(self) else self.modules():  # torchvision's initialisation
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# --- ShuffleNetV2 ------------------------------------------------------------------------------------------


def _channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    return torch.transpose(x, 1, 2).contiguous().view(batch, -1, height, width)


def _depthwise(channels: int, stride: int) -> nn.Conv2d:
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


class InvertedResidualShuffle(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int):
        super().__init__()
        self.stride = stride
        branch_features = oup // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                _depthwise(inp, stride),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
            _depthwise(branch_features, stride),
            nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return _channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    STAGE_REPEATS = [4, 8, 4]

    def __init__(self, stage_out_channels: list[int], num_classes: int = 1000, in_channels: int = 3):
        super().__init__()
        out_ch = stage_out_channels[0]
        self.conv1 = nn.Sequential(
            nn.Conv2d(in_channels, out_ch, 3, 2, 1, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True)
        )
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch = out_ch
        stages = []
        for repeats, out_ch in zip(self.STAGE_REPEATS, stage_out_channels[1:4], strict=True):
            blocks = [InvertedResidualShuffle(in_ch, out_ch, 2)]
            blocks += [InvertedResidualShuffle(out_ch, out_ch, 1) for _ in range(repeats - 1)]
            stages.append(nn.Sequential(*blocks))
            in_ch = out_ch
        self.stage2, self.stage3, self.stage4 = stages
        out_ch = stage_out_channels[-1]
        self.conv5 = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 1, 1, 0, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True)
        )
        self.fc = nn.Linear(out_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


SHUFFLENET_CHANNELS = {"x0_5": [24, 48, 96, 192, 1024], "x1_0": [24, 116, 232, 464, 1024]}


def shufflenet_factory(width: str) -> Callable[..., ShuffleNetV2]:
    channels = SHUFFLENET_CHANNELS[width]

    def make(num_classes: int = 1000, in_channels: int = 3) -> ShuffleNetV2:
        return ShuffleNetV2(channels, num_classes=num_classes, in_channels=in_channels)

    return make


# --- SqueezeNet 1.0 ----------------------------------------------------------------------------------------


class Fire(nn.Module):
    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int, expand3x3_planes: int):
        super().__init__()
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.squeeze(x))
        return torch.cat([self.relu(self.expand1x1(x)), self.relu(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 96, kernel_size=7, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(96, 16, 64, 64),
            Fire(128, 16, 64, 64),
            Fire(128, 32, 128, 128),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(256, 32, 128, 128),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(512, 64, 256, 256),
        )
        final_conv = nn.Conv2d(512, num_classes, kernel_size=1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1))
        )
        for module in () if is_meta(self) else self.modules():  # torchvision's initialisation
            if isinstance(module, nn.Conv2d):
                if module is final_conv:
                    nn.init.normal_(module.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.constant_(module.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)
