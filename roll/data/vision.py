"""The image inputs of a vision-language sample, carried beside its token ids.

A sample whose ids hold image placeholder tokens carries its images' processed pixels: a
`VisionInputs` with `pixel_values [patches, D]` (the rows of every image, in the order the images
appear in the ids) and `image_grid_thw [images, 3]` (each image's temporal, height, width patches).
Batches keep one per sample in `batch.meta["vision"]` (None for text samples); a micro-batch
concatenates its samples' in row order, which is the order the model matches them to placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class VisionInputs:
    pixel_values: torch.Tensor  # [patches, D] float
    image_grid_thw: torch.Tensor  # [images, 3] long

    def __post_init__(self) -> None:
        if self.image_grid_thw.dim() != 2 or self.image_grid_thw.shape[1] != 3:
            raise ValueError(f"image_grid_thw must be [images, 3], got {tuple(self.image_grid_thw.shape)}")
        patches = int(self.image_grid_thw.prod(dim=1).sum())
        if self.pixel_values.shape[0] != patches:
            raise ValueError(f"pixel_values has {self.pixel_values.shape[0]} patch rows, image_grid_thw says {patches}")

    @property
    def num_images(self) -> int:
        return self.image_grid_thw.shape[0]


def cat_vision(parts: list[VisionInputs | None]) -> VisionInputs | None:
    """The images of several samples (or turns) in order; None when none has any."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    return VisionInputs(torch.cat([p.pixel_values for p in present]), torch.cat([p.image_grid_thw for p in present]))


def batch_vision(meta: dict[str, list], indices: list[int]) -> VisionInputs | None:
    """The images of the samples `indices` of a batch (its `meta["vision"]`), in that order."""
    column = meta.get("vision")
    return cat_vision([column[i] for i in indices]) if column is not None else None
