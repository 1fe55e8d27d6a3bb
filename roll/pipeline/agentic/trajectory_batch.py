"""The one function that turns Trajectory samples (from env managers) into a training Batch."""

from __future__ import annotations

from collections import defaultdict

import torch

from roll.data.batch import Batch
from roll.data.episodes import episode_key
from roll.pipeline.agentic.trajectory import Trajectory

# Trajectory fields that become `batch.meta` columns (one entry per sample), besides `extras`.
META_FIELDS = ("traj_id", "traj_group_id", "tag", "env_seed", "messages", "env_metrics", "actions", "step_rewards",
               "stop_reason", "step_index", "state_key", "turn_state_keys", "random_turns",
               "weight_version")


def trajectories_to_batch(trajs: list[Trajectory], pad_token_id: int) -> Batch:
    """Right-padded `[B, L]` tensors per docs/internals.md (input_ids, attention_mask, position_ids,
    response_mask, infer_logprobs), `scores [B]`, and META_FIELDS plus every `extras` name as meta, plus
    `vision` (each sample's VisionInputs or None) when any sample has images."""
    if not trajs:
        raise ValueError("no trajectories to batch")
    width = max(len(t.input_ids) for t in trajs)

    def padded(rows: list[list], pad: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([list(row) + [pad] * (width - len(row)) for row in rows], dtype=dtype)

    lengths = torch.tensor([len(t.input_ids) for t in trajs])
    attention_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    position_ids = torch.arange(width)[None, :].expand(len(trajs), width) * attention_mask
    tensors = {
        "input_ids": padded([t.input_ids for t in trajs], pad_token_id, torch.long),
        "attention_mask": attention_mask,
        "position_ids": position_ids.contiguous(),
        "response_mask": padded([t.response_mask for t in trajs], 0, torch.long),
        "infer_logprobs": padded([t.infer_logprobs for t in trajs], 0.0, torch.float32),
        "scores": torch.tensor([t.score for t in trajs], dtype=torch.float32),
    }
    meta = {name: [getattr(t, name) for t in trajs] for name in META_FIELDS}
    if any(t.vision is not None for t in trajs):  # only vision-language batches carry the column
        meta["vision"] = [t.vision for t in trajs]
    extra_names = sorted({name for t in trajs for name in t.extras})
    clashes = [name for name in extra_names if name in meta or name in tensors]
    if clashes:
        raise ValueError(f"Trajectory.extras names {clashes} shadow built-in batch keys; rename them")
    meta.update({name: [t.extras.get(name) for t in trajs] for name in extra_names})
    return Batch(tensors=tensors, meta=meta)


def one_per_episode(trajs: list[Trajectory]) -> list[Trajectory]:
    """One sample per episode: the samples of one episode share its metrics, so they count once."""
    return list({episode_key(t.traj_id, id(t)): t for t in trajs}.values())


def rollout_metrics(trajs: list[Trajectory], prefix: str = "env") -> dict[str, float]:
    """Per-tag means of every env metric (ROLL's names: env/{tag}/success, …) plus scores and lengths.
    Env metrics and scores are per episode: the samples of one episode (same traj_id: a step-wise
    manager's turns, an agent runner's samples) count once; response_length is per sample."""
    by_tag: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_tag[t.tag].append(t)
    out: dict[str, float] = {}
    for tag, items in by_tag.items():
        episodes = one_per_episode(items)
        keys = {k for t in episodes for k in t.env_metrics}
        for key in sorted(keys):
            values = [t.env_metrics[key] for t in episodes if key in t.env_metrics]
            out[f"{prefix}/{tag}/{key}"] = sum(values) / len(values)
        out[f"{prefix}/{tag}/score"] = sum(t.score for t in episodes) / len(episodes)
        out[f"{prefix}/{tag}/response_length"] = sum(sum(t.response_mask) for t in items) / len(items)
    return out
