"""A small CNN to show Stash's user-model hook:

    stash profile --model examples/models/tiny_cnn.py:make --input-shape 3,32,32 --num-classes 10

Stash calls the factory with num_classes=... because its signature takes it. Any input size works: the
adaptive pool makes the classifier independent of height and width.
"""

from torch import nn


def make(num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    )
