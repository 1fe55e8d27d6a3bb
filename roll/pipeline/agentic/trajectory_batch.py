"""The one function that turns trajectories (lists from env managers) into a training Batch."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from roll.data.batch import Batch


def trajectories_to_batch(trajs: list[dict[str, Any]], pad_token_id: int) -> Batch:
    """Right-padded `[B, L]` tensors per docs/internals.md, `scores [B]`, and the rollout meta."""
    if not trajs:
        raise ValueError("no trajectories to batch")
    width = max(len(t["input_ids"]) for t in trajs)

    def padded(key: str, pad: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([list(t[key]) + [pad] * (width - len(t[key])) for t in trajs], dtype=dtype)

    input_ids = padded("input_ids", pad_token_id, torch.long)
    lengths = torch.tensor([len(t["input_ids"]) for t in trajs])
    attention_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    position_ids = torch.arange(width)[None, :].expand(len(trajs), width) * attention_mask
    tensors = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids.contiguous(),
        "response_mask": padded("response_mask", 0, torch.long),
        "infer_logprobs": padded("infer_logprobs", 0.0, torch.float32),
        "scores": torch.tensor([t["score"] for t in trajs], dtype=torch.float32),
    }
    meta_keys = ("traj_id", "traj_group_id", "tag", "env_seed", "messages", "env_metrics", "actions", "step_rewards")
    meta = {k: [t.get(k) for t in trajs] for k in meta_keys}
    return Batch(tensors=tensors, meta=meta)


def rollout_metrics(trajs: list[dict[str, Any]], prefix: str = "env") -> dict[str, float]:
    """Per-tag means of every env metric (ROLL's names: env/{tag}/success, …) plus scores and lengths."""
    by_tag: dict[str, list[dict]] = defaultdict(list)
    for t in trajs:
        by_tag[t["tag"]].append(t)
    out: dict[str, float] = {}
    for tag, items in by_tag.items():
        keys = {k for t in items for k in t["env_metrics"]}
        for key in sorted(keys):
            values = [t["env_metrics"][key] for t in items if key in t["env_metrics"]]
            out[f"{prefix}/{tag}/{key}"] = sum(values) / len(values)
        out[f"{prefix}/{tag}/score"] = sum(t["score"] for t in items) / len(items)
        out[f"{prefix}/{tag}/response_length"] = sum(sum(t["response_mask"]) for t in items) / len(items)
    return out
