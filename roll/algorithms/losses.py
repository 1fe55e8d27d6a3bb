"""Loss aggregation and the actor / critic losses (docs/algorithms.md, step 9).

Gradient accumulation must not change the maths: a mini-batch split into micro-batches must give
the gradient of one pass over the whole mini-batch. So every loss takes the denominators of its
aggregation (`num_tokens`, `num_seqs`) from the caller, counted over the whole mini-batch
(`agg_denominators(mini_batch_mask)`); each micro-batch's loss is then its share of the mini-batch
loss and the shares sum to it. Left as None they are counted from the mask given (one pass).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from roll.algorithms.kl import kl_penalty
from roll.algorithms.masked import masked_mean
from roll.algorithms.pg_variants import PGInputs, PGVariantArgs, ppo_loss
from roll.utils.registry import Registry
# Same bound as the KL estimators: exp(±20) is finite in float32, so the ratio and its gradient are too.
_LOG_RATIO_CLAMP = 20.0

Count = int | float | Tensor | None
# An aggregation mode: fn(masked_loss [B, L] (0 off the mask), mask, num_tokens, num_seqs, norm_length) -> scalar.
AggFn = Callable[[Tensor, Tensor, Count, Count, int], Tensor]
LOSS_AGG_MODES: Registry[AggFn] = Registry("loss_agg_mode")


def register_loss_agg_mode(name: str, *, replace: bool = False) -> Callable[[AggFn], AggFn]:
    """Decorator registering an aggregation as `loss_agg_mode: name`; it receives the masked per-token
    loss, the mask and the mini-batch denominators (already defaulted), see `agg_loss`."""
    return LOSS_AGG_MODES.register(name, replace=replace)


def agg_denominators(mask: Tensor) -> tuple[int, int]:
    """(num_tokens, num_seqs) of a mini-batch: masked tokens, and rows with at least one masked token."""
    return int((mask != 0).sum()), int((mask != 0).any(dim=-1).sum())


def _divide(total: Tensor, denominator: Count) -> Tensor:
    d = torch.as_tensor(denominator, dtype=total.dtype, device=total.device)
    # An empty mini-batch gives a zero loss that still has a graph (so backward() works everywhere).
    return total / torch.where(d > 0, d, torch.ones_like(d))


def agg_loss(
    loss_mat: Tensor,
    mask: Tensor,
    mode: str = "seq-mean-token-mean",
    num_tokens: Count = None,
    num_seqs: Count = None,
    norm_length: int | None = None,
) -> Tensor:
    """Reduce a `[B, L]` per-token loss to a scalar. With n_b = tokens of row b, S = Σ_b:

    - `token-mean`:              Σ_b Σ_t ℓ_bt / num_tokens
    - `seq-mean-token-sum`:      Σ_b (Σ_t ℓ_bt) / num_seqs
    - `seq-mean-token-mean`:     Σ_b (Σ_t ℓ_bt / n_b) / num_seqs   (rows with n_b = 0 add 0)
    - `seq-mean-token-sum-norm`: Σ_b (Σ_t ℓ_bt) / (num_seqs · norm_length)   (Dr. GRPO)

    num_tokens / num_seqs default to this mask's counts (`agg_denominators`); a sequence is a row
    with ≥ 1 masked token, so empty rows (padding) never dilute the mean. `norm_length` is a
    constant length (pass `sequence_length`); it defaults to L, which changes with padding under
    dynamic batching — pass it explicitly whenever micro-batches differ in width.
    Further modes are whatever `register_loss_agg_mode` added.
    """
    aggregate = LOSS_AGG_MODES.get(mode)
    zero = torch.zeros((), dtype=loss_mat.dtype, device=loss_mat.device)
    selected = torch.where(mask != 0, loss_mat, zero) * mask.to(loss_mat.dtype)
    if num_tokens is None:
        num_tokens = int((mask != 0).sum())
    if num_seqs is None:
        num_seqs = int((mask != 0).any(dim=-1).sum())
    return aggregate(selected, mask, num_tokens, num_seqs, mask.shape[-1] if norm_length is None else norm_length)


@register_loss_agg_mode("token-mean")
def _token_mean(selected: Tensor, mask: Tensor, num_tokens: Count, num_seqs: Count, norm_length: int) -> Tensor:
    return _divide(selected.sum(), num_tokens)


@register_loss_agg_mode("seq-mean-token-sum")
def _seq_mean_token_sum(selected: Tensor, mask: Tensor, num_tokens: Count, num_seqs: Count, norm_length: int) -> Tensor:
    return _divide(selected.sum(), num_seqs)


@register_loss_agg_mode("seq-mean-token-mean")
def _seq_mean_token_mean(selected: Tensor, mask: Tensor, num_tokens: Count, num_seqs: Count, norm_length: int) -> Tensor:
    per_seq = _divide(selected.sum(dim=-1), (mask != 0).sum(dim=-1))
    return _divide(per_seq.sum(), num_seqs)


@register_loss_agg_mode("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(selected: Tensor, mask: Tensor, num_tokens: Count, num_seqs: Count, norm_length: int) -> Tensor:
    return _divide(selected.sum(), torch.as_tensor(num_seqs, dtype=selected.dtype) * norm_length)


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | bool | None = None,
    loss_agg_mode: str = "seq-mean-token-mean",
    num_tokens: Count = None,
    num_seqs: Count = None,
    norm_length: int | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate with asymmetric clip range and optional dual clip.

    ρ = exp(logp − old), ℓ = max(−A ρ, −A clip(ρ, 1 − clip_low, 1 + clip_high)); with dual clip c,
    ℓ = min(ℓ, −c A) where A < 0 (bounds the loss of a negative advantage under a huge ratio).
    `dual_clip`: c itself, or True for c = 1 + 2·clip_high (ROLL's default), or None/False for off.
    Metrics (floats, token means over this call's mask; ROLL's definitions): pg_clipfrac (tokens where
    the clipped branch won, ROLL's `clipfrac`), pg_clipfrac_dual, ppo_ratio_low/high_clipfrac (ratio
    outside the range, whatever A), ppo_kl = approxkl (mean ½(logp − old)²), policykl (mean
    logp − old), ratio_mean / ratio_max / ratio_min.
    """
    if dual_clip is True:
        dual_clip = 1.0 + 2.0 * clip_high
    elif dual_clip is False:
        dual_clip = None
    advantages, old_logprobs = advantages.detach(), old_logprobs.detach()
    log_ratio = (logprobs - old_logprobs).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    args = PGVariantArgs(pg_clip_low=clip_low, pg_clip_high=clip_high, dual_clip=dual_clip)
    loss_mat, flags = ppo_loss(PGInputs(logprobs, old_logprobs, advantages, mask), args)
    dual_hit = flags.get("pg_clipfrac_dual", torch.zeros_like(loss_mat, dtype=torch.bool))
    loss = agg_loss(loss_mat, mask, loss_agg_mode, num_tokens, num_seqs, norm_length)

    with torch.no_grad():
        valid = mask != 0
        ratios = ratio[valid]
        metrics = {
            "pg_clipfrac": float(masked_mean(flags["clipfrac"].to(loss_mat.dtype), mask)),
            "pg_clipfrac_dual": float(masked_mean(dual_hit.to(loss_mat.dtype), mask)),
            "ppo_kl": float(masked_mean(0.5 * log_ratio.square(), mask)),
            "policykl": float(masked_mean(log_ratio, mask)),
            "ppo_ratio_low_clipfrac": float(masked_mean((ratio < 1.0 - clip_low).to(loss_mat.dtype), mask)),
            "ppo_ratio_high_clipfrac": float(masked_mean((ratio > 1.0 + clip_high).to(loss_mat.dtype), mask)),
            "ratio_mean": float(ratios.mean()) if ratios.numel() else 1.0,
            "ratio_max": float(ratios.max()) if ratios.numel() else 1.0,
            "ratio_min": float(ratios.min()) if ratios.numel() else 1.0,
        }
        metrics["approxkl"] = metrics["ppo_kl"]
    return loss, metrics


def kl_loss(
    logprobs: Tensor,
    ref_logprobs: Tensor,
    mask: Tensor,
    kind: str = "k3",
    loss_agg_mode: str = "seq-mean-token-mean",
    num_tokens: Count = None,
    num_seqs: Count = None,
    norm_length: int | None = None,
) -> Tensor:
    """KL(policy ‖ ref) as a loss term (`use_kl_loss`), per-token estimator `kind`, aggregated like the PG loss."""
    return agg_loss(kl_penalty(logprobs, ref_logprobs, kind), mask, loss_agg_mode, num_tokens, num_seqs, norm_length)


def entropy_loss(
    entropy: Tensor,
    mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    num_tokens: Count = None,
    num_seqs: Count = None,
    norm_length: int | None = None,
) -> Tensor:
    """Aggregated token entropy. It is a bonus: total = pg_loss − entropy_loss_coef · entropy_loss."""
    return agg_loss(entropy, mask, loss_agg_mode, num_tokens, num_seqs, norm_length)


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    value_clip: float | None = None,
    loss_agg_mode: str = "seq-mean-token-mean",
    num_tokens: Count = None,
    num_seqs: Count = None,
    norm_length: int | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Critic loss ½ max((V − R)², (V_clip − R)²), V_clip = old + clip(V − old, ±value_clip).

    Without `value_clip` it is ½ (V − R)². The pessimistic max (as in PPO2 / ROLL / veRL) stops the
    critic from exploiting a big step that happens to land near the return. Metrics: vf_clipfrac
    (tokens where the clipped term was larger), vpred_mean.
    """
    returns, old_values = returns.detach(), old_values.detach()
    loss_mat = (values - returns).square()
    clipfrac = 0.0
    if value_clip is not None:
        clipped_values = old_values + (values - old_values).clamp(-value_clip, value_clip)
        clipped_loss = (clipped_values - returns).square()
        with torch.no_grad():
            clipfrac = float(masked_mean((clipped_loss > loss_mat).to(loss_mat.dtype), mask))
        loss_mat = torch.maximum(loss_mat, clipped_loss)
    loss = 0.5 * agg_loss(loss_mat, mask, loss_agg_mode, num_tokens, num_seqs, norm_length)
    with torch.no_grad():
        metrics = {"vf_clipfrac": clipfrac, "vpred_mean": float(masked_mean(values, mask))}
    return loss, metrics
