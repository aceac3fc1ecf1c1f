"""A model whose gradients make the network dominate: 6.3 MB of gradients, almost no compute.

stash profile --model tests/cluster/netmodel.py:make --input-shape 3,16,16 --num-classes 10 ...
"""

from torch import nn


def make(num_classes: int = 10) -> nn.Module:
    # 768 x 2048 + 2048 x 10 weights: 1.6 M parameters, 6.3 MB of float32 gradients per iteration.
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 2048), nn.ReLU(), nn.Linear(2048, num_classes))
