"""Fallback forward for architectures the lean path (kv_forward.py) does not cover: the model's own
forward with one transformers DynamicCache per slot, one sequence at a time. Same interface as
LeanForward, so the engine's scheduling, per-episode cache reuse and prefix sharing still apply;
only the batching of the matmuls is lost."""

from __future__ import annotations

import copy

import torch
from transformers import DynamicCache


def _crop(cache: DynamicCache, length: int) -> None:
    """Keeps the first `length` tokens (transformers' crop takes how many to drop, as a negative number)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


class SlotDynamicCaches:
    def __init__(self, config) -> None:
        self.config = config
        self.caches: dict[int, DynamicCache] = {}
        self.slots = 0

    def ensure(self, slots: int, capacity: int) -> None:
        self.slots = max(self.slots, slots)  # DynamicCache grows by itself; count slots like SlotKVCache

    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        cache = copy.deepcopy(self.caches[src])
        _crop(cache, length)
        self.caches[dst] = cache


class HFCacheForward:
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.device = next(model.parameters()).device

    def new_cache(self, slots: int = 8, capacity: int = 512) -> SlotDynamicCaches:
        return SlotDynamicCaches(self.model.config)

    @torch.inference_mode()
    def prefill(self, cache: SlotDynamicCaches, chunks: list[tuple[int, int, list[int]]]) -> torch.Tensor:
        out = []
        for slot, start, ids in chunks:
            kv = cache.caches.get(slot)
            if kv is None or start == 0:
                kv = DynamicCache()
            else:
                _crop(kv, start)
            if kv.get_seq_length() != start:
                raise RuntimeError(f"slot {slot} holds {kv.get_seq_length()} tokens, expected {start}")
            positions = torch.arange(start, start + len(ids), device=self.device)[None]
            logits = self.model(input_ids=torch.tensor([ids], device=self.device), cache=kv,
                                position_ids=positions, use_cache=True).logits
            cache.caches[slot] = kv
            out.append(logits[0, -1].float())
        return torch.stack(out)

    def decode(self, cache: SlotDynamicCaches, slots: list[int], positions: list[int], tokens: list[int]) -> torch.Tensor:
        return self.prefill(cache, [(s, p, [t]) for s, p, t in zip(slots, positions, tokens)])
