"""Advantage estimators (docs/algorithms.md, step 8): GAE, and discounted returns for reinforce / GRPO.

Estimators are registered by name (`register_adv_estimator`) and all take one `AdvantageInputs`;
the config key `adv_estimator` picks one, validation accepts any registered name, and
`compute_advantages` applies the shared post-processing (whitening, masking, clipping).

Time steps are response tokens only. A multi-turn trajectory is one row
`prompt, response₁, obs₁, response₂, obs₂, response₃` whose observation tokens were not chosen by
the policy, so they are not actions and get no advantage. Both estimators therefore run over the
row's response tokens in order, as if they were contiguous: the last token of response₁ is followed
by the first token of response₂, so GAE bootstraps with V(first token of response₂) across the
observation gap and rewards from later turns flow back into earlier ones (discounted by γ per
response token, never per observation token). After the last response token the episode has
ended: V = 0 there. Rewards and values at non-response positions are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from roll.algorithms.masked import masked_whiten
from roll.utils.registry import Registry


@dataclass(frozen=True)
class AdvantageInputs:
    """What an advantage estimator receives for one batch of B trajectories, each L tokens long.

    Every `[B, L]` tensor is aligned with the batch's `input_ids` (roll.data.batch): position t of
    row b is token t of trajectory b, prompt and observation tokens included.

    - `token_rewards` `[B, L]` float: the reward credited to each token — each row's normalised,
      clipped episode reward on its last response token, minus `kl_coef · KL` per response token when
      `add_token_level_kl` is on; 0 off the response tokens.
    - `response_mask` `[B, L]` float: 1 where the policy generated the token (the actions), else 0.
    - `gamma`, `lambd`: the config's discount and GAE λ.
    - `values` `[B, L]` float or None: the critic's value per token; None unless the estimator was
      registered with `needs_values=True` (then the pipeline runs a critic and this is never None).
    - `response_level_rewards` `[B]` float or None: each trajectory's reward after normalisation and
      clipping (the number `token_rewards` carries on its last response token).
    - `meta`: the batch's per-trajectory plain values, each a list of B entries: `traj_group_id`
      (trajectories of one GRPO group share it), `tag` (the env's name in custom_envs), `env_id`, …
    - `options`: config values an estimator reads beyond γ and λ, by name (the step-level ones read
      `step_reward_gamma`, `episode_reward_weight`, `step_reward_weight` and the reward
      normalisation's `norm_method`, `norm_mean_type`, `norm_std_type`, `norm_grouping`).
    """

    token_rewards: Tensor
    response_mask: Tensor
    gamma: float
    lambd: float
    values: Tensor | None = None
    response_level_rewards: Tensor | None = None
    meta: dict[str, list] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


# An estimator returns (advantages, returns), both [B, L]; values off the response tokens are ignored.
EstimatorFn = Callable[[AdvantageInputs], "tuple[Tensor, Tensor]"]


@dataclass(frozen=True)
class AdvantageEstimator:
    name: str
    fn: EstimatorFn
    needs_values: bool  # True: the pipeline trains a critic and passes its values
    needs_step_samples: bool = False  # True: every sample must be one turn (a step-wise env manager)
    needs_episode_samples: bool = False  # True: every sample must be a whole episode (not a step-wise manager)


ADV_ESTIMATORS: Registry[AdvantageEstimator] = Registry("adv_estimator")


def register_adv_estimator(name: str, *, needs_values: bool = False, needs_step_samples: bool = False,
                           needs_episode_samples: bool = False, replace: bool = False) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator registering `fn(inputs: AdvantageInputs) -> (advantages, returns)` as `adv_estimator: name`.

    `needs_values=True` makes the pipeline run a critic (as for `gae`). `needs_step_samples=True`
    makes config validation require a step-wise env manager for every training env (as for `gigpo`);
    `needs_episode_samples=True` the opposite, one sample per episode (as for `traj_gigpo`).
    Register in a module that the driver imports before the config is validated (e.g. the module of
    your pipeline or env); see docs/algorithms.md.
    """

    def decorate(fn: EstimatorFn) -> EstimatorFn:
        ADV_ESTIMATORS.add(name, AdvantageEstimator(name, fn, needs_values, needs_step_samples,
                                                  needs_episode_samples), replace=replace)
        return fn

    return decorate


def estimator_needs_values(name: str) -> bool:
    """Whether `adv_estimator: name` needs a critic; False for a name nobody registered (validation reports it)."""
    return name in ADV_ESTIMATORS and ADV_ESTIMATORS.get(name).needs_values


def _pack_responses(response_mask: Tensor) -> tuple[Tensor, Tensor, int]:
    """A permutation per row that moves response tokens to the front in their original order.

    Returns (order [B, L], packed_mask [B, L], longest response count). Working on the packed view
    makes "consecutive response tokens are consecutive time steps" a plain right-to-left scan.
    """
    is_response = response_mask != 0
    # A stable sort on "is not a response token" keeps both groups in their original order.
    order = torch.argsort((~is_response).to(torch.int8), dim=-1, stable=True)
    counts = is_response.sum(dim=-1)
    positions = torch.arange(response_mask.shape[-1], device=response_mask.device)
    packed_mask = positions.unsqueeze(0) < counts.unsqueeze(1)
    longest = int(counts.max()) if counts.numel() else 0
    return order, packed_mask, longest


def _packed(x: Tensor, order: Tensor, packed_mask: Tensor) -> Tensor:
    gathered = x.gather(-1, order)
    return torch.where(packed_mask, gathered, torch.zeros((), dtype=x.dtype, device=x.device))


def _unpack(packed: Tensor, order: Tensor) -> Tensor:
    return torch.zeros_like(packed).scatter_(-1, order, packed)


def compute_gae(
    token_rewards: Tensor, values: Tensor, response_mask: Tensor, gamma: float, lambd: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over response tokens (see the module docstring).

    δ_t = r_t + γ V_{t+1} − V_t,  A_t = δ_t + γλ A_{t+1},  returns_t = A_t + V_t,
    where t, t+1 are consecutive response tokens and V after the last one is 0.
    Both outputs are `[B, L]` and 0 off the response tokens.
    """
    order, packed_mask, longest = _pack_responses(response_mask)
    rewards = _packed(token_rewards, order, packed_mask)
    vals = _packed(values.to(rewards.dtype), order, packed_mask)
    advantages = torch.zeros_like(rewards)
    next_value = torch.zeros_like(rewards[:, 0])
    next_advantage = torch.zeros_like(rewards[:, 0])
    # Positions past a row's response count are zero in rewards and values, so they yield A = 0
    # and hand V = 0, A = 0 to the row's last real step: the episode-end bootstrap.
    for t in range(longest - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value - vals[:, t]
        next_advantage = delta + gamma * lambd * next_advantage
        advantages[:, t] = next_advantage
        next_value = vals[:, t]
    returns = torch.where(packed_mask, advantages + vals, torch.zeros_like(advantages))
    return _unpack(advantages, order), _unpack(returns, order)


def compute_discounted_returns(token_rewards: Tensor, response_mask: Tensor, gamma: float) -> Tensor:
    """G_t = r_t + γ G_{t+1} over consecutive response tokens; `[B, L]`, 0 off the response tokens."""
    order, packed_mask, longest = _pack_responses(response_mask)
    rewards = _packed(token_rewards, order, packed_mask)
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in range(longest - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return _unpack(returns, order)


@register_adv_estimator("gae", needs_values=True)
def gae_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """GAE over the response tokens, bootstrapped by the critic's values."""
    return compute_gae(inputs.token_rewards, inputs.values, inputs.response_mask, inputs.gamma, inputs.lambd)


@register_adv_estimator("reinforce")
def reinforce_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """The discounted return is the advantage (no baseline beyond reward normalisation)."""
    returns = compute_discounted_returns(inputs.token_rewards, inputs.response_mask, inputs.gamma)
    return returns, returns


@register_adv_estimator("grpo")
def grpo_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """As reinforce: GRPO's group baseline is already in the rewards (group normalisation, step 6)."""
    return reinforce_estimator(inputs)


def compute_advantages(
    estimator: str,
    token_rewards: Tensor,
    response_mask: Tensor,
    gamma: float,
    lambd: float,
    values: Tensor | None = None,
    whiten: bool = False,
    clip: float | None = None,
    whiten_rewards: bool = False,
    response_level_rewards: Tensor | None = None,
    meta: dict[str, list] | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[Tensor, Tensor]:
    """Advantages and returns from the registered estimator named `estimator` (gae, reinforce, grpo, …).

    `gae` needs critic `values`; `reinforce` and `grpo` use the discounted return as the advantage
    (GRPO's baseline is already in the rewards, from group normalisation). Then, in this order:
    optional whitening over all response tokens of the batch (unbiased var, ε = 1e-8; skipped for
    ≤ 1 token), masking to response tokens, clamping to ±`clip`. Returns are never whitened or clipped.
    """
    entry = ADV_ESTIMATORS.get(estimator)
    if entry.needs_values and values is None:
        raise ValueError(f"adv_estimator {estimator!r} needs critic values; pass values=")
    if whiten_rewards:
        token_rewards = masked_whiten(token_rewards, response_mask, shift_mean=False)
    inputs = AdvantageInputs(token_rewards, response_mask, gamma, lambd, values, response_level_rewards,
                             dict(meta or {}), dict(options or {}))
    advantages, returns = entry.fn(inputs)
    if whiten:
        advantages = masked_whiten(advantages, response_mask)
    advantages = torch.where(response_mask != 0, advantages, torch.zeros_like(advantages))
    if clip is not None:
        advantages = advantages.clamp(-clip, clip)
    return advantages, returns
