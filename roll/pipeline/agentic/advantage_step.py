"""Rewards and advantages for one batch (docs/algorithms.md, steps 6-8): episode scores → normalised rewards → token rewards → advantages.

This is the only place that maps config keys onto the pure functions of roll.algorithms, so the
pipeline reads as the step list and each formula stays testable on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from roll.algorithms import (
    clip_rewards,
    compute_advantages,
    kl_penalty,
    masked_mean,
    masked_whiten,
    normalize_rewards,
    step_credit_metrics,
    token_level_rewards,
)
from roll.data.batch import Batch

if TYPE_CHECKING:
    from roll.configs.base_config import BaseConfig


def reward_groups(batch: Batch, grouping: str) -> list:
    """The group key of each trajectory for reward normalisation (`batch`, `tags` or any meta key)."""
    if grouping == "batch":
        return [0] * len(batch)
    key = "tag" if grouping in ("tags", "tag") else grouping
    if key not in batch.meta:
        raise KeyError(f"reward_normalization.grouping {grouping!r}: trajectories carry no {key!r}; use batch, tags, traj_group_id or one of {sorted(batch.meta)}")
    return [g if isinstance(g, (int, str, float, tuple)) else str(g) for g in batch.meta[key]]


def compute_advantage_step(batch: Batch, config: "BaseConfig", kl_coef: float) -> dict[str, float]:
    """Adds response_level_rewards, token_level_rewards, advantages and returns to `batch`; returns metrics.

    The advantages come from the estimator registered under `config.adv_estimator`
    (roll.algorithms.register_adv_estimator), which also receives the batch's meta (group ids, tags).
    """
    mask = batch["response_mask"].float()
    norm = config.reward_normalization
    rewards = normalize_rewards(batch["scores"].float(), reward_groups(batch, norm.grouping), norm.method,
                                norm.norm_mean_type, norm.norm_std_type)
    rewards, reward_clip_frac = clip_rewards(rewards, config.reward_clip)
    metrics = {"critic/reward_clip_frac": reward_clip_frac}

    kl = None
    if "ref_logprobs" in batch:
        # Without a separate old-log-prob pass (a single update), the rollout's own log-probs are the
        # policy's: the same weights generated them.
        policy_logprobs = batch.tensors.get("old_logprobs", batch.tensors.get("infer_logprobs"))
        kl = kl_penalty(policy_logprobs, batch["ref_logprobs"], config.kl_penalty) * mask
        # The batch mean of each trajectory's mean KL: what the adaptive KL controller steers (docs/algorithms.md).
        has_response = mask.sum(-1) > 0
        metrics["critic/kl"] = float(masked_mean(kl, mask, dim=-1)[has_response].mean()) if has_response.any() else 0.0
    use_kl_reward = config.add_token_level_kl and kl is not None
    token_rewards = token_level_rewards(rewards, mask, kl if use_kl_reward else None, kl_coef if use_kl_reward else 0.0)
    if config.whiten_rewards:
        token_rewards = masked_whiten(token_rewards, mask, shift_mean=False)

    advantages, returns = compute_advantages(
        config.adv_estimator, token_rewards, mask, config.gamma, config.lambd,
        values=batch.tensors.get("values"), whiten=config.whiten_advantages, clip=config.advantage_clip,
        response_level_rewards=rewards, meta=batch.meta, options=estimator_options(config),
    )
    batch.tensors.update(response_level_rewards=rewards, token_level_rewards=token_rewards, advantages=advantages, returns=returns)
    metrics.update(_stats("critic/score", batch["scores"].float()))
    metrics.update(_stats("critic/rewards", rewards))
    metrics.update(_stats("critic/advantages", advantages[mask.bool()]))
    metrics.update(_stats("critic/returns", returns[mask.bool()]))
    if "values" in batch:
        metrics.update(_stats("critic/values", batch["values"][mask.bool()]))
    metrics["critic/kl_coef"] = kl_coef
    metrics.update(step_credit_metrics(batch.meta, advantages, mask))
    return metrics


def estimator_options(config: "BaseConfig") -> dict:
    """The config values estimators read beyond γ and λ (AdvantageInputs.options)."""
    norm = config.reward_normalization
    options = {"norm_method": norm.method, "norm_mean_type": norm.norm_mean_type, "norm_std_type": norm.norm_std_type,
               "norm_grouping": norm.grouping}
    for key in ("step_reward_gamma", "episode_reward_weight", "step_reward_weight", "cap_idle_turn_advantage"):
        if hasattr(config, key):
            options[key] = getattr(config, key)
    return options


def _stats(prefix: str, x: torch.Tensor) -> dict[str, float]:
    if x.numel() == 0:
        return {}
    x = x.double()
    return {f"{prefix}/mean": float(x.mean()), f"{prefix}/max": float(x.max()), f"{prefix}/min": float(x.min())}
