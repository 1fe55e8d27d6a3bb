"""Checksums that prove the inference engine holds the trainer's weights after a weight sync.

A tensor's checksum is the sum of its bytes read as 32-bit integers, modulo 2^32 (a tensor whose size
is not a multiple of 4 bytes: its 16-bit or 8-bit words). It is exact (no rounding, so the same bits
give the same number on any machine, thread count or summation order), it changes when any single
element changes (a 16-bit element moves its word by less than 2^16, or by less than 2^16 times 2^16),
and it costs one pass over the weights at the speed of a float sum (an int64 accumulator was 20x slower). The trainer casts each weight to the inference dtype first, the
same rounding `load_state_dict` applies when it copies a float32 weight into a bfloat16 model.

Because the sum is additive, an engine that stores several Hugging Face weights in one tensor
(vLLM's fused `qkv_proj`, `gate_up_proj`) compares the sum of their checksums with its own one
(`fold_checksums`). The sum does not see two elements swapped within a tensor; a sync that loads the
wrong tensor, a stale one, a partly copied one or none at all changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_MASK32 = (1 << 32) - 1


def tensor_checksum(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> int:
    """The wrapping sum of the bytes of `tensor` as 32-bit words (cast to `dtype` first when given)."""
    flat = tensor.detach()
    if dtype is not None and flat.is_floating_point():
        flat = flat.to(dtype)
    raw = flat.contiguous().reshape(-1).view(torch.uint8)
    for word in (torch.int32, torch.int16):
        size = torch.empty(0, dtype=word).element_size()
        if raw.numel() % size == 0:
            return _wrap(int(raw.view(word).sum(dtype=torch.int32)))
    return _wrap(int(raw.sum(dtype=torch.int32)))


def state_checksums(state: Mapping[str, torch.Tensor], dtype: torch.dtype | None = None) -> dict[str, int]:
    return {name: tensor_checksum(tensor, dtype) for name, tensor in state.items()}


def fold_checksums(checksums: Mapping[str, int], key: Callable[[str], str | None]) -> dict[str, int]:
    """Checksums regrouped under `key(name)` (an engine's own tensor names), summed like the engine's
    fused tensor holds its parts; names whose key is None (a weight the engine does not keep, such as
    a tied output layer) are left out. Sums wrap at 32 bits, as the checksums do."""
    folded: dict[str, int] = {}
    for name, value in checksums.items():
        target = key(name)
        if target is not None:
            folded[target] = _wrap(folded.get(target, 0) + value)
    return folded


def _wrap(value: int) -> int:
    return value & _MASK32


@dataclass(frozen=True)
class ChecksumMismatch:
    name: str
    trainer: int
    inference: int | None  # None: the inference engine has no tensor of that name


def compare_checksums(trainer: Mapping[str, int], inference: Mapping[str, int]) -> list[ChecksumMismatch]:
    """Every trainer weight whose checksum the inference side does not hold (in the trainer's order)."""
    return [ChecksumMismatch(name, value, inference.get(name)) for name, value in trainer.items()
            if inference.get(name) != value]


class WeightSyncMismatch(RuntimeError):
    """The inference engine does not hold the weights the trainer sent: the run stops rather than train
    on samples from other weights."""

    def __init__(self, version: int, rank: int, mismatches: list[ChecksumMismatch]) -> None:
        self.version, self.rank, self.mismatches = version, rank, mismatches
        first = mismatches[0]
        held = "no such tensor" if first.inference is None else f"checksum {first.inference}"
        super().__init__(
            f"weight sync of version {version}: actor_infer rank {rank} does not hold actor_train's weights: "
            f"{len(mismatches)} tensor(s) differ, first {first.name!r}: trainer checksum {first.trainer}, "
            f"inference {held}; others: {[m.name for m in mismatches[1:6]]}. The weights did not reach the "
            f"engine as sent (a load that skipped names, a LoRA adapter not merged, a corrupted transfer). "
            f"verify_weight_sync: false turns this check off")
