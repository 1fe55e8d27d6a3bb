"""Advantage estimators (SPEC §4 step 8): GAE, and discounted returns for reinforce / GRPO.

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

import torch
from torch import Tensor

from roll.algorithms.masked import masked_whiten

ADV_ESTIMATORS = ("gae", "reinforce", "grpo")


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
) -> tuple[Tensor, Tensor]:
    """Advantages and returns for `adv_estimator` ∈ {gae, reinforce, grpo}.

    `gae` needs critic `values`; `reinforce` and `grpo` use the discounted return as the advantage
    (GRPO's baseline is already in the rewards, from group normalisation). Then, in this order:
    optional whitening over all response tokens of the batch (unbiased var, ε = 1e-8; skipped for
    ≤ 1 token), masking to response tokens, clamping to ±`clip`. Returns are never whitened or clipped.
    """
    if whiten_rewards:
        token_rewards = masked_whiten(token_rewards, response_mask, shift_mean=False)
    if estimator == "gae":
        if values is None:
            raise ValueError("adv_estimator 'gae' needs critic values; pass values=")
        advantages, returns = compute_gae(token_rewards, values, response_mask, gamma, lambd)
    elif estimator in ("reinforce", "grpo"):
        returns = compute_discounted_returns(token_rewards, response_mask, gamma)
        advantages = returns
    else:
        raise ValueError(f"adv_estimator must be one of {ADV_ESTIMATORS}, got {estimator!r}")
    if whiten:
        advantages = masked_whiten(advantages, response_mask)
    advantages = torch.where(response_mask != 0, advantages, torch.zeros_like(advantages))
    if clip is not None:
        advantages = advantages.clamp(-clip, clip)
    return advantages, returns
