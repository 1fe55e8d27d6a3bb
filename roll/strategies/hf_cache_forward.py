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
    """One DynamicCache per slot. The engine's budget bounds it as it bounds SlotKVCache (at most
    `slots` sessions of at most `capacity` tokens), but each cache grows as its session does, and a
    slot handed to a new session drops the old one's at once."""

    def __init__(self, config, slots: int, capacity: int) -> None:
        self.config = config
        self.caches: dict[int, DynamicCache] = {}
        self.slots, self.capacity = slots, capacity
        self.claimed: set[int] = set()

    def claim(self, slot: int) -> None:
        self.caches.pop(slot, None)
        self.claimed.add(slot)

    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        cache = copy.deepcopy(self.caches[src])
        _crop(cache, length)
        self.caches[dst] = cache


class HFCacheForward:
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.device = next(model.parameters()).device

    def new_cache(self, slots: int, capacity: int) -> SlotDynamicCaches:
        return SlotDynamicCaches(self.model.config, slots, capacity)

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
            # logits_to_keep=1: only the last position, where the next token is sampled, goes through
            # the output layer (a long prefill would otherwise make [tokens, vocab] logits)
            logits = self.model(input_ids=torch.tensor([ids], device=self.device), cache=kv,
                                position_ids=positions, use_cache=True, logits_to_keep=1).logits
            cache.caches[slot] = kv
            out.append(logits[0, -1].float())
        return torch.stack(out)

    def decode(self, cache: SlotDynamicCaches, slots: list[int], positions: list[int], tokens: list[int]) -> torch.Tensor:
        return self.prefill(cache, [(s, p, [t]) for s, p, t in zip(slots, positions, tokens)])
