"""The prompt tokens samples of a micro-batch share, run through the model once per group of samples.

A one-turn agent prompt repeats the system prompt and the game's instructions in every sample: in
FrozenLake's one-board prompt, 72 of its 125 tokens. And a GRPO group repeats its whole prompt in each of
its samples (eight replies to one board, or to one Countdown question). A micro-batch of 16 such samples
computes those tokens 16 times. Here the rows are put in groups that share a prefix (`plan_prefix_groups`),
the model runs on each group's prefix once (one row), its keys and values are expanded, without a copy,
to the group's rows, and the rest of each row runs against them as the model would continue a cached
prompt. Autograd sums the rows' gradients through the expansion, so values and gradients equal the plain
forward's (tests/workers/test_shared_prefix.py); only the work drops.

It needs the model's own KV cache inside a training forward, which transformers turns off under
gradient checkpointing, and rows that each hold one sample from position 0 (not packed rows).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from transformers import DynamicCache

from roll.data.micro_batch import MicroBatch
from roll.strategies.decode_engine import common_prefix_length

# A few shared tokens save little and cost a second forward call; 16 is a judgement, not a measured
# break-even (the one-turn prompts here share 72).
MIN_SHARED_TOKENS = 16
# Each group is one more pair of forward calls: a plan with more groups must save at least this many
# tokens per extra group (a judgement: on 2 CPU cores a call costs about as much as a few dozen tokens).
TOKENS_PER_EXTRA_GROUP = 32


@dataclass(frozen=True)
class PrefixGroup:
    rows: list[int]  # rows of the micro-batch
    prefix: int  # leading tokens all of them share, run once (0: each row runs whole)
    width: int  # the longest of their samples: the columns the group runs

    def cost(self) -> int:
        """Tokens through the model."""
        return self.prefix + len(self.rows) * (self.width - self.prefix)




def _group(rows: list[int], shared: int, lengths: list[int]) -> PrefixGroup:
    """`rows` sharing their first `shared` tokens; at least one token of every sample stays outside the
    prefix, so each row has something to run."""
    prefix = min(shared, min(lengths[r] for r in rows) - 1)
    if len(rows) < 2 or prefix < MIN_SHARED_TOKENS:
        prefix = 0
    return PrefixGroup(sorted(rows), prefix, max(lengths[r] for r in rows))


def plan_prefix_groups(mb: MicroBatch) -> list[PrefixGroup] | None:
    """The cheapest split of the micro-batch's rows into groups that each run their shared prefix once,
    or None when sharing saves nothing (or rows hold packed samples).

    Sorted by their tokens, rows that share a prefix are neighbours (as in a trie), so each candidate
    plan cuts the sorted rows wherever two neighbours share fewer than some number of tokens; the plan
    kept is the one with the fewest tokens through the model, each extra group counted as
    TOKENS_PER_EXTRA_GROUP more."""
    rows = mb.input_ids.shape[0]
    one_sample_per_row = len(mb.segments) == rows and all(s[:2] == (i, 0) for i, s in enumerate(mb.segments))
    if rows < 2 or not one_sample_per_row:
        return None
    lengths = [s[2] for s in mb.segments]
    tokens = [mb.input_ids[r, : lengths[r]].tolist() for r in range(rows)]
    order = sorted(range(rows), key=lambda r: tokens[r])
    shared_with_previous = [common_prefix_length(tokens[a], tokens[b]) for a, b in zip(order, order[1:])]

    def plan(cut_below: int) -> list[PrefixGroup]:
        groups, current, shared = [], [order[0]], None
        for row, common in zip(order[1:], shared_with_previous):
            if common < cut_below:
                groups.append(_group(current, shared or 0, lengths))
                current, shared = [row], None
            else:
                current.append(row)
                shared = common if shared is None else min(shared, common)
        groups.append(_group(current, shared or 0, lengths))
        return groups

    def price(groups: list[PrefixGroup]) -> int:
        return sum(g.cost() for g in groups) + TOKENS_PER_EXTRA_GROUP * (len(groups) - 1)

    plans = [plan(cut) for cut in sorted(set(shared_with_previous) | {0}) if cut == 0 or cut >= MIN_SHARED_TOKENS]
    best = min(plans, key=price)
    plain = rows * mb.input_ids.shape[1]
    return best if any(g.prefix for g in best) and price(best) < plain else None


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


def forward_in_prefix_groups(model: nn.Module, inputs: dict, groups: list[PrefixGroup]) -> Tensor:
    """The model's `.logits` output `[rows, width, ...]` for `inputs`, each group's rows run together on
    the group's own columns, their shared prefix once; the columns past a group's width come back 0
    (padding there, which no caller reads)."""
    input_ids, position_ids = inputs["input_ids"], inputs["position_ids"]
    width = input_ids.shape[1]
    outputs, order = [], []
    for group in groups:
        index = torch.tensor(group.rows, device=input_ids.device)
        part = {"input_ids": input_ids[index, : group.width], "position_ids": position_ids[index, : group.width]}
        out = (forward_with_shared_prefix(model, part, group.prefix) if group.prefix
               else model(**part, attention_mask=None, use_cache=False).logits)
        outputs.append(F.pad(out, (0, 0, 0, width - group.width)))
        order.extend(group.rows)
    stacked = torch.cat(outputs, dim=0)
    if order == sorted(order):
        return stacked
    back = torch.empty(len(order), dtype=torch.long, device=stacked.device)
    back[torch.tensor(order, device=stacked.device)] = torch.arange(len(order), device=stacked.device)
    return stacked.index_select(0, back)
