"""Drop GRPO groups whose scores are all equal, when they would carry no gradient (DAPO's dynamic
sampling, in its "shorten the step" form: the step trains on fewer samples instead of refilling).

Why: a group is one map answered ``group_size`` times; with the group's mean subtracted from its
scores, a group whose episodes all scored the same gets advantage 0 on every token, so its
policy-gradient term is 0. Unless another loss term (KL, entropy) or a batch-wide transform
(whitening, a critic's values) still touches those samples, scoring and training them costs a
forward and a backward pass for nothing. Early in a run on a small model most groups are such
groups (all episodes fail), so this is most of the training time.

With ``traj_gigpo`` a turn's advantage also holds its step return normalised among the group's turns
that acted in the same state, so a group is dropped only when its scores are equal and, in every
state its turns acted in, their discounted step returns are equal too (a collapsed policy's group of
identical episodes, say).

Config key ``drop_zero_gradient_groups`` (default true). ``zero_gradient_blockers`` lists what in a
config makes equal-score groups still carry gradient; with any blocker the filter keeps every group.
Metrics: ``batch/groups_dropped``, ``batch/groups_kept`` and ``batch/samples_trained`` every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from roll.algorithms.rewards import METHOD_TYPES
from roll.algorithms.step_advantages import discounted_step_return
from roll.data.batch import Batch

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

# Estimators whose advantages are sums of the normalised rewards alone (no critic, no batch statistics).
REWARD_ONLY_ESTIMATORS = ("grpo", "reinforce")
# ... plus each turn's step return normalised within its anchor state (checked by zero_credit_groups).
STATE_CREDIT_ESTIMATORS = ("traj_gigpo",)


def zero_gradient_blockers(config: "AgenticConfig") -> list[str]:
    """Why a group of equal scores would still move the policy under ``config`` (empty: it would not)."""
    norm = config.reward_normalization
    mean_type = norm.norm_mean_type or METHOD_TYPES.get(norm.method, (None, None))[0]
    checks = (
        (config.adv_estimator not in REWARD_ONLY_ESTIMATORS + STATE_CREDIT_ESTIMATORS,
         f"adv_estimator {config.adv_estimator!r} is not one of {REWARD_ONLY_ESTIMATORS + STATE_CREDIT_ESTIMATORS}"),
        (norm.grouping != "traj_group_id", f"reward_normalization.grouping is {norm.grouping!r}, not traj_group_id"),
        (mean_type != "group", "reward_normalization does not subtract the group mean"),
        (config.whiten_advantages, "whiten_advantages shifts every advantage by the batch mean"),
        (config.add_token_level_kl and config.uses_reference, "add_token_level_kl puts a KL reward on every token"),
        (config.use_kl_loss and config.kl_loss_coef > 0, "use_kl_loss adds a KL loss on every sample"),
        (config.entropy_loss_coef != 0, "entropy_loss_coef adds an entropy term on every sample"),
        (config.entropy_floor > 0, "entropy_floor adds an entropy term on every sample below the floor"),
        (config.actor_train.pg_variant == "kimi15", "pg_variant kimi15 adds a squared log-ratio term on every sample"),
    )
    return [reason for blocked, reason in checks if blocked]


def equal_score_groups(scores: torch.Tensor, group_ids: list) -> set:
    """The group ids whose scores are all exactly equal."""
    low: dict = {}
    high: dict = {}
    for score, group in zip(scores.tolist(), group_ids):
        low[group] = min(score, low.get(group, score))
        high[group] = max(score, high.get(group, score))
    return {group for group in low if low[group] == high[group]}


def zero_credit_groups(batch: Batch, step_gamma: float) -> set:
    """traj_gigpo's zero-advantage groups: equal scores, and within each state the group's turns acted
    in, equal discounted step returns (γ = ``step_gamma``)."""
    group_ids = batch["traj_group_id"]
    equal = equal_score_groups(batch["scores"], group_ids)
    returns: dict = {}
    for group, rewards, keys in zip(group_ids, batch["step_rewards"], batch["turn_state_keys"]):
        if group in equal:
            for turn, key in enumerate(keys):
                returns.setdefault((group, key), set()).add(discounted_step_return(rewards, turn, step_gamma))
    return equal - {group for (group, _), values in returns.items() if len(values) > 1}


def drop_zero_gradient_groups(batch: Batch, enabled: bool, blockers: list[str], min_samples: int = 1,
                              step_gamma: float | None = None) -> tuple[list[int], dict[str, float]]:
    """(indices of the samples worth training on, metrics). ``step_gamma``: the config's
    ``step_reward_gamma`` for an estimator of STATE_CREDIT_ESTIMATORS, None for the others. Every group is kept when ``enabled`` is
    false or ``blockers`` (from ``zero_gradient_blockers``) is not empty, and when fewer than
    ``min_samples`` (the training ranks, each needing a sample) but more than none would be left.
    The result may be empty: nothing in this batch carries gradient, and the step trains nothing."""
    group_ids = batch["traj_group_id"]
    groups = set(group_ids)
    if not enabled or blockers:
        dropped: set = set()
    elif step_gamma is None:
        dropped = equal_score_groups(batch["scores"], group_ids)
    else:
        dropped = zero_credit_groups(batch, step_gamma)
    kept = [i for i, group in enumerate(group_ids) if group not in dropped]
    if 0 < len(kept) < min_samples:
        dropped, kept = set(), list(range(len(batch)))
    return kept, {
        "batch/groups_dropped": float(len(dropped)),
        "batch/groups_kept": float(len(groups) - len(dropped)),
        "batch/samples_trained": float(len(kept)),
    }


def copy_back_rewards(batch: Batch, trained: Batch, kept: list[int]) -> None:
    """Give the whole batch the normalised rewards its trained part got; a dropped group's are 0 (the
    reason it was dropped), so saved trajectories show every episode's reward."""
    if trained is batch or "response_level_rewards" not in trained:
        return
    rewards = torch.zeros(len(batch), dtype=trained["response_level_rewards"].dtype)
    rewards[torch.tensor(kept, dtype=torch.long)] = trained["response_level_rewards"]
    batch.tensors["response_level_rewards"] = rewards
