"""Training-time image augmentation in Pillow + torch (torchvision's RandomResizedCrop / flip / normalise)."""

from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def random_resized_crop_box(
    width: int,
    height: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator | None = None,
) -> tuple[int, int, int, int]:
    """(left, top, crop_w, crop_h) chosen as torchvision does: 10 random tries, then a central crop."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        draws = torch.rand(2, generator=generator).tolist()
        target_area = area * (scale[0] + (scale[1] - scale[0]) * draws[0])
        aspect_ratio = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * draws[1])
        crop_w = round(math.sqrt(target_area * aspect_ratio))
        crop_h = round(math.sqrt(target_area / aspect_ratio))
        if 0 < crop_w <= width and 0 < crop_h <= height:
            top = int(torch.randint(0, height - crop_h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - crop_w + 1, (1,), generator=generator))
            return left, top, crop_w, crop_h
    # Fallback: the largest central crop whose aspect ratio lies inside `ratio`.
    in_ratio = width / height
    if in_ratio < min(ratio):
        crop_w, crop_h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        crop_w, crop_h = round(height * max(ratio)), height
    else:
        crop_w, crop_h = width, height
    return (width - crop_w) // 2, (height - crop_h) // 2, crop_w, crop_h


class TrainTransform:
    """PIL image -> normalised float tensor (C, H, W): random resized crop, horizontal flip, normalise."""

    def __init__(
        self,
        output_hw: tuple[int, int] = (224, 224),
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        flip_p: float = 0.5,
        mean: tuple[float, ...] = IMAGENET_MEAN,
        std: tuple[float, ...] = IMAGENET_STD,
        generator: torch.Generator | None = None,
    ) -> None:
        self.output_hw = (int(output_hw[0]), int(output_hw[1]))
        self.scale = scale
        self.ratio = ratio
        self.flip_p = flip_p
        # (C, 1, 1) so they broadcast over the image; kept as tensors to avoid rebuilding per sample.
        self.mean = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
        # None = torch's global RNG, which DataLoader seeds differently in every worker.
        self.generator = generator

    def __call__(self, image: Image.Image) -> torch.Tensor:
        if image.mode != "RGB":
            image = image.convert("RGB")
        left, top, crop_w, crop_h = random_resized_crop_box(
            image.width, image.height, self.scale, self.ratio, self.generator
        )
        out_h, out_w = self.output_hw
        # Crop and resize in one resampling pass (bilinear, antialiased like torchvision on PIL images).
        crop_box = (left, top, left + crop_w, top + crop_h)
        image = image.resize((out_w, out_h), Image.Resampling.BILINEAR, box=crop_box)
        if float(torch.rand(1, generator=self.generator)) < self.flip_p:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = torch.from_numpy(np.array(image, dtype=np.uint8))  # (H, W, C), a writable copy
        tensor = pixels.permute(2, 0, 1).contiguous().to(torch.float32).div_(255.0)
        return tensor.sub_(self.mean).div_(self.std)
