"""Builders shared by the worker tests: right-padded batches of chosen lengths, worker configs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from roll.configs.worker_config import ModelArgs, StrategyArgs, TrainingArgs, WorkerConfig
from roll.data.batch import Batch

LENGTHS = [40, 7, 23, 31, 12, 3, 18, 27]


def make_batch(lengths: list[int] = LENGTHS, width: int | None = None, seed: int = 0, vocab: int = 300) -> Batch:
    """Random token ids, right-padded; the first 2 tokens of each sample are prompt, the rest response;
    old_logprobs / ref_logprobs / advantages / values / returns are random on the response tokens."""
    g = torch.Generator().manual_seed(seed)
    n, width = len(lengths), width or max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(5, vocab, (n, width), generator=g) * mask
    response = mask.clone()
    response[:, :2] = 0
    tensors = {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": torch.arange(width).expand(n, width) * mask,
        "response_mask": response,
    }
    for key, scale, shift in [("old_logprobs", 0.3, -6.0), ("ref_logprobs", 0.3, -6.0), ("advantages", 1.0, 0.0),
                              ("values", 0.5, 0.0), ("returns", 1.0, 0.5)]:
        tensors[key] = (torch.randn(n, width, generator=g) * scale + shift) * response
    return Batch(tensors)


def actor_config(model_dir: Path, strategy: str = "hf_train", **overrides) -> WorkerConfig:
    """fp32, a big learning rate and adam_epsilon=1: Adam's first step is then ~lr·g/(|g|+1), a smooth
    function of the gradient, so equal updated weights mean equal gradients (a sign flip of a ~0
    gradient under eps=1e-8 would move a weight by 2·lr and hide nothing but break comparisons)."""
    config = WorkerConfig(
        model_args=ModelArgs(model_name_or_path=str(model_dir)),
        training_args=TrainingArgs(learning_rate=0.1, adam_epsilon=1.0, per_device_train_batch_size=2,
                                   gradient_accumulation_steps=4),
        strategy_args=StrategyArgs(strategy_name=strategy),
        infer_batch_size=3,
    )
    return dataclasses.replace(config, **overrides)


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys(), (sorted(a.keys() ^ b.keys()))[:5]
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
