"""Weights that cross between Ray workers with one copy each way.

Ray pickles a torch tensor into its object store as bytes, and the reader gets a fresh tensor built
from them: with the copy the trainer makes first (weights it goes on training must not change under
the store) and the reader's copy into its model, a weight sync copied every byte four or five times,
each into newly allocated memory. Ray stores numpy arrays out of band instead and hands readers a
read-only view of the store's shared memory. So `SharedWeights` carries each weight as a byte view
(any dtype, bf16 included) of the trainer's live tensor: Ray copies it once into the store when the
worker method returns (before the worker runs anything else), and `tensors()` gives the reader views
of the store that its `load_state_dict` copies once into the model. On 135M fp32 weights in 32 MB
buckets the sync went from 2.4 s to 0.4 s (docs/pipeline.md).

Only for a reader that copies at once: the views are valid while the `SharedWeights` lives.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class SharedWeights:
    """Named weights as byte views: `raw[name]` is a uint8 array of the weight's bytes, in `dtype[name]`
    and `shape[name]`."""

    raw: dict[str, np.ndarray]
    dtype: dict[str, torch.dtype]
    shape: dict[str, tuple[int, ...]]

    @classmethod
    def of(cls, state: dict[str, torch.Tensor]) -> "SharedWeights":
        """Views of `state`'s tensors (moved to the CPU first where they are elsewhere; made contiguous
        where they are not), without a copy on the CPU."""
        raw, dtype, shape = {}, {}, {}
        for name, tensor in state.items():
            flat = tensor.detach().cpu().contiguous().reshape(-1)
            raw[name] = flat.view(torch.uint8).numpy()
            dtype[name], shape[name] = tensor.dtype, tuple(tensor.shape)
        return cls(raw, dtype, shape)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The weights as tensors viewing `raw` (read-only memory when it came through Ray's store):
        copy them, never write them."""
        with warnings.catch_warnings():
            # torch warns that the store's memory is not writable: these tensors are only read
            warnings.filterwarnings("ignore", message=".*not writable.*")
            return {name: torch.from_numpy(array).view(self.dtype[name]).view(self.shape[name])
                    for name, array in self.raw.items()}

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self.raw.values())
