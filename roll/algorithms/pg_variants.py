"""Policy-gradient variants (`pg_variant`): the per-token loss each one puts on the response tokens.

ROLL's names and formulas (its agentic actor's pg worker). With logp the trainer's log-prob of a
token now, old its log-prob under the policy that the batch is trained against (the old log-probs),
ρ = exp(logp − old) and A the advantage:

- `vanilla`: ℓ = −A · logp                                   (REINFORCE; ρ plays no part)
- `ppo`:     ℓ = max(−A ρ, −A clip(ρ, 1 − ε_low, 1 + ε_high)), with optional dual clip
- `tis`:     ℓ = −sg(clip(ρ, tis_lower_bound, tis_upper_bound)) · A · logp
- `topr`:    ℓ = w₊ · (−A logp) on samples whose episode score > 0, and
             w₋ · (−sg(clip(ρ, 0, 1)) · A · logp) on the others (Tapered Off-Policy REINFORCE)
- `cispo`:   ℓ = −sg(clip(ρ, 1 − ε_low, 1 + ε_high)) · A · logp; with the unified mask, tokens where
             A > 0 and ρ > 1 + ε_high, or A < 0 and ρ < 1 − ε_low, get no loss (MiniMax-M1)
- `kimi15`:  ℓ = −A · logp + τ/2 · (logp − old)²             (Kimi k1.5)

sg is stop-gradient. Each variant returns the `[B, L]` loss matrix (the caller multiplies it by the
train-inference IS weight, if any, and aggregates it with `agg_loss`) and token-mean metric tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from roll.algorithms.masked import masked_mean
from roll.utils.registry import Registry

# Same bound as ppo_policy_loss: exp(±20) stays finite in float32.
_LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class PGInputs:
    """One micro-batch's tensors. logprobs (with grad), old_logprobs, advantages, mask: `[B, L]`;
    scores: `[B]` each sample's episode score (TOPR splits samples on its sign)."""

    logprobs: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    mask: Tensor
    scores: Tensor | None = None


@dataclass(frozen=True)
class PGVariantArgs:
    """The variants' constants; names and defaults are ROLL's (actor_train keys in a ROLL YAML)."""

    pg_clip_low: float = 0.2
    pg_clip_high: float = 0.2
    dual_clip: float | None = None  # ppo only: c > 1, or None for off
    # the variants' constants: actor_train keys (WORKER_KEYS); WorkerConfig takes its defaults from here
    tis_lower_bound: float = 0.0
    tis_upper_bound: float = 1.0
    topr_positive_weight: float = 1.0
    topr_negative_weight: float = 1.0
    cispo_epsilon_low: float = 0.1
    cispo_epsilon_high: float = 0.1
    cispo_use_unified_mask: bool = False
    kimi15_tau: float = 0.1

    def __post_init__(self) -> None:
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (it bounds −A·ratio for A < 0), got {self.dual_clip}")


WORKER_KEYS = ("tis_lower_bound", "tis_upper_bound", "topr_positive_weight", "topr_negative_weight",
               "cispo_epsilon_low", "cispo_epsilon_high", "cispo_use_unified_mask", "kimi15_tau")
PGFn = Callable[[PGInputs, PGVariantArgs], tuple[Tensor, dict[str, Tensor]]]
PG_VARIANTS: Registry[PGFn] = Registry("pg_variant")


def register_pg_variant(name: str, *, replace: bool = False) -> Callable[[PGFn], PGFn]:
    """Decorator registering `fn(inputs, args) -> (loss_mat [B, L], metrics {name: token tensor})` as `pg_variant: name`."""
    return PG_VARIANTS.register(name, replace=replace)


def ratio_of(inputs: PGInputs) -> Tensor:
    """ρ = exp(logp − old), with the log-ratio clamped so ρ and its gradient stay finite."""
    return torch.exp((inputs.logprobs - inputs.old_logprobs.detach()).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP))


def pg_loss_matrix(variant: str, inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, float]]:
    """The `[B, L]` per-token loss of `variant` and its metrics (floats, token means over `inputs.mask`)."""
    loss_mat, metric_tensors = PG_VARIANTS.get(variant)(inputs, args)
    with torch.no_grad():
        metrics = {k: float(masked_mean(v.to(loss_mat.dtype), inputs.mask)) for k, v in metric_tensors.items()}
    return loss_mat, metrics


@register_pg_variant("vanilla")
def vanilla_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    return -inputs.advantages.detach() * inputs.logprobs, {}


@register_pg_variant("ppo")
def ppo_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    advantages = inputs.advantages.detach()
    ratio = ratio_of(inputs)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - args.pg_clip_low, 1.0 + args.pg_clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    metrics = {"ppo_ratio_low_clipfrac": ratio < 1.0 - args.pg_clip_low,
               "ppo_ratio_high_clipfrac": ratio > 1.0 + args.pg_clip_high,
               "clipfrac": clipped > unclipped}
    if args.dual_clip is not None:
        bound = -args.dual_clip * advantages
        dual_hit = (advantages < 0) & (loss_mat > bound)
        loss_mat = torch.where(dual_hit, bound, loss_mat)
        metrics["pg_clipfrac_dual"] = dual_hit
    return loss_mat, metrics


@register_pg_variant("tis")
def tis_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    ratio = ratio_of(inputs)
    weight = ratio.clamp(args.tis_lower_bound, args.tis_upper_bound).detach()
    metrics = {"tis_lower_clipfrac": ratio < args.tis_lower_bound, "tis_upper_clipfrac": ratio > args.tis_upper_bound}
    return -weight * inputs.advantages.detach() * inputs.logprobs, metrics


@register_pg_variant("topr")
def topr_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    if inputs.scores is None:
        raise ValueError("pg_variant topr needs each sample's episode score (PGInputs.scores)")
    positive = (inputs.scores > 0).to(inputs.logprobs.dtype).unsqueeze(-1)
    ratio = ratio_of(inputs)
    weight = ratio.clamp(0.0, 1.0).detach()
    reinforce = -inputs.advantages.detach() * inputs.logprobs
    loss_mat = args.topr_positive_weight * positive * reinforce + args.topr_negative_weight * (1 - positive) * weight * reinforce
    metrics = {"topr_positive_tokens": positive.expand_as(ratio), "topr_negative_upper_clipfrac": (ratio > 1.0) & (positive == 0)}
    return loss_mat, metrics


@register_pg_variant("cispo")
def cispo_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    low, high = 1.0 - args.cispo_epsilon_low, 1.0 + args.cispo_epsilon_high
    advantages = inputs.advantages.detach()
    ratio = ratio_of(inputs)
    loss_mat = -ratio.clamp(low, high).detach() * advantages * inputs.logprobs
    metrics = {"cispo_lower_clipfrac": ratio < low, "cispo_upper_clipfrac": ratio > high}
    if args.cispo_use_unified_mask:
        dropped = ((advantages > 0) & (ratio > high)) | ((advantages < 0) & (ratio < low))
        loss_mat = loss_mat * (~dropped).to(loss_mat.dtype)
        metrics["cispo_masked_tokens"] = dropped
    return loss_mat, metrics


@register_pg_variant("kimi15")
def kimi15_loss(inputs: PGInputs, args: PGVariantArgs) -> tuple[Tensor, dict[str, Tensor]]:
    log_ratio = inputs.logprobs - inputs.old_logprobs.detach()
    loss_mat = -inputs.advantages.detach() * inputs.logprobs + 0.5 * args.kimi15_tau * log_ratio.square()
    return loss_mat, {"kimi15_log_ratio_sq": log_ratio.detach().square()}
