"""The tokens every sample of a micro-batch starts with, run through the model once.

A one-turn agent prompt repeats the system prompt and the game's instructions in every sample: in
FrozenLake's one-board prompt, 72 of its 125 tokens. A micro-batch of 16 such samples computes those
tokens 16 times. Here the model runs on the shared prefix once (one row), its keys and values are
expanded, without a copy, to every row, and the rest of each row runs against them as the model would
continue a cached prompt. Autograd sums the rows' gradients through the expansion, so values and
gradients equal the plain forward's (tests/workers/test_shared_prefix.py); only the work drops.

It needs the model's own KV cache inside a training forward, which transformers turns off under
gradient checkpointing, and rows that each hold one sample from position 0 (not packed rows).
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor, nn
from transformers import DynamicCache

from roll.data.micro_batch import MicroBatch

# A few shared tokens save little and cost a second forward call; 16 is a judgement, not a measured
# break-even (the one-turn prompts here share 72).
MIN_SHARED_TOKENS = 16


def shared_prefix_length(mb: MicroBatch) -> int:
    """How many leading tokens all rows share, when sharing them is worth it and allowed; else 0.
    At least one token of every sample stays outside the prefix, so each row has something to run."""
    rows = mb.input_ids.shape[0]
    one_sample_per_row = len(mb.segments) == rows and all(s[:2] == (i, 0) for i, s in enumerate(mb.segments))
    if rows < 2 or not one_sample_per_row:
        return 0
    same = (mb.input_ids == mb.input_ids[:1]).all(dim=0)
    differs = (~same).nonzero()
    common = int(differs[0]) if len(differs) else mb.input_ids.shape[1]
    length = min(common, min(s[2] for s in mb.segments) - 1)
    return length if length >= MIN_SHARED_TOKENS else 0


def cache_keyword(model: nn.Module) -> str:
    """transformers 5.2x calls the cache argument (and output) `cache`; earlier versions (vLLM's pin) `past_key_values`.
    A LoRA model (peft) passes it on to the transformers model it wraps."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def forward_with_shared_prefix(model: nn.Module, inputs: dict, prefix: int) -> Tensor:
    """The model's `.logits` output `[rows, width, ...]` for `inputs` (input_ids, position_ids) whose rows
    all start with the same `prefix` tokens, computing those tokens once."""
    input_ids, position_ids = inputs["input_ids"], inputs["position_ids"]
    rows = input_ids.shape[0]
    head = model(input_ids=input_ids[:1, :prefix], position_ids=position_ids[:1, :prefix], use_cache=True)
    cache = DynamicCache(config=model.config)
    keyword = cache_keyword(model)
    for index, layer in enumerate(getattr(head, keyword).layers):
        cache.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index)
    tail = model(input_ids=input_ids[:, prefix:], position_ids=position_ids[:, prefix:], use_cache=True,
                 **{keyword: cache})
    shared = head.logits.expand(rows, -1, -1)
    return torch.cat([shared, tail.logits], dim=1)
