"""Train-inference correction (`train_infer_correction`): importance weights and filters between the
log-probs the inference engine reported when it sampled a token (behaviour, `infer_logprobs`) and the
trainer's log-probs of the same token (`old_logprobs`).

The two differ when inference and training run different kernels or precisions, and when a sample was
generated with older weights (async training). Per token, with old and infer the two log-probs:

    log r_t = old_t − infer_t,   r_t = exp(log r_t),   d_t = exp(old_t) − exp(infer_t)

Aggregation levels (`agg_type` / `weight_type`), each broadcast back to the tokens it covers:
- `token`:     r_t, d_t
- `segment`:   exp(mean of log r over the contiguous run of response tokens holding t), and the mean of
               d over that run (a multi-turn trajectory has one segment per turn)
- `geometric`: exp(mean over the sample's response tokens of log r), the mean of d
- `sequence`:  exp(sum over the sample's response tokens of log r), the sum of d

The IS weight is the chosen level's ratio, clamped to [0, upper_bound]; a filter keeps a token when its
level's ratio lies in [ratio_low, ratio_high] and/or its diff in [diff_low, diff_high]. With identical
log-probs every ratio is 1 and every diff 0, so the correction is the identity whenever 1 and 0 lie in
the ranges. Names, defaults and formulas are ROLL's (roll/utils/train_infer_corrections.py there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from roll.algorithms.kl import kl_penalty
from roll.algorithms.masked import masked_mean, masked_sum
from roll.utils.registry import Registry


@dataclass
class ISWeightConfig:
    enabled: bool = False
    weight_type: str = "token"  # a level in CORRECTION_LEVELS
    upper_bound: float | None = 1.2  # None: no clamp
    detach: bool = True


@dataclass
class CorrectionFilterConfig:
    enabled: bool = False
    agg_type: str = "token"  # a level in CORRECTION_LEVELS
    ratio_enabled: bool = True
    ratio_low: float = 0.8
    ratio_high: float = 1.2
    diff_enabled: bool = False
    diff_low: float = -0.2
    diff_high: float = 0.2


@dataclass
class TrainInferCorrectionConfig:
    """ROLL's `train_infer_correction` block: one IS weight and a list of filters, applied in order."""

    is_weight: ISWeightConfig = field(default_factory=ISWeightConfig)
    filters: list[CorrectionFilterConfig] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.is_weight.enabled or any(f.enabled for f in self.filters)


# A level: fn(log_ratio [B, L], diff [B, L], mask [B, L]) -> (ratio [B, L], diff [B, L]) at that level.
LevelFn = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]
CORRECTION_LEVELS: Registry[LevelFn] = Registry("train_infer_correction level (agg_type / weight_type)")


def register_correction_level(name: str, *, replace: bool = False) -> Callable[[LevelFn], LevelFn]:
    return CORRECTION_LEVELS.register(name, replace=replace)


def segment_masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Per row, the mean of `x` over each contiguous run of mask ≠ 0, written at that run's positions; 0 off the mask."""
    on = (mask != 0).long()
    starts = on * (1 - torch.nn.functional.pad(on[:, :-1], (1, 0)))
    segment = torch.cumsum(starts, dim=-1) * on  # 1, 2, … per run; 0 off the mask
    values = torch.where(on.bool(), x, torch.zeros_like(x))
    width = x.shape[-1] + 1
    sums = torch.zeros(x.shape[0], width, dtype=x.dtype, device=x.device).scatter_add_(1, segment, values)
    counts = torch.zeros_like(sums).scatter_add_(1, segment, on.to(x.dtype))
    means = sums / counts.clamp(min=1)
    return means.gather(1, segment) * on.to(x.dtype)


@register_correction_level("token")
def _token(log_ratio: Tensor, diff: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    return log_ratio.exp(), diff


@register_correction_level("segment")
def _segment(log_ratio: Tensor, diff: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    return segment_masked_mean(log_ratio, mask).exp(), segment_masked_mean(diff, mask)


@register_correction_level("geometric")
def _geometric(log_ratio: Tensor, diff: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    ratio = masked_mean(log_ratio, mask, dim=-1).exp().unsqueeze(-1).expand_as(log_ratio)
    return ratio, masked_mean(diff, mask, dim=-1).unsqueeze(-1).expand_as(diff)


@register_correction_level("sequence")
def _sequence(log_ratio: Tensor, diff: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    ratio = masked_sum(log_ratio, mask, dim=-1).exp().unsqueeze(-1).expand_as(log_ratio)
    return ratio, masked_sum(diff, mask, dim=-1).unsqueeze(-1).expand_as(diff)


def level_stats(old_logprobs: Tensor, infer_logprobs: Tensor, mask: Tensor, level: str) -> tuple[Tensor, Tensor]:
    """(ratio, diff) `[B, L]` at `level` between the trainer's and the inference engine's log-probs."""
    masked = mask != 0
    zero = torch.zeros((), dtype=old_logprobs.dtype, device=old_logprobs.device)
    # Off-mask positions may hold anything (padding): zero them so no inf reaches a sum.
    old = torch.where(masked, old_logprobs, zero)
    infer = torch.where(masked, infer_logprobs.to(old.dtype), zero)
    return CORRECTION_LEVELS.get(level)(old - infer, old.exp() - infer.exp(), mask)


def train_infer_correction(
    config: TrainInferCorrectionConfig, old_logprobs: Tensor, infer_logprobs: Tensor, mask: Tensor,
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """(is_weight [B, L], filter_mask [B, L] of 0/1, metrics). Without an enabled weight the weight is 1;
    without an enabled filter the filter keeps every token. Metrics (ROLL's names, token means over
    `mask`): train_infer_ratio_<level>_mean and train_infer_diff_<level>_mean for every level,
    train_infer_kl (k3), train_infer_ratio_token_max/min, is_weight_mean and is_weight_clipfrac (the
    fraction truncated at upper_bound), train_infer_<level>_ratio/diff_mask_mean (each filter's pass
    rate) and train_infer_final_mask_mean."""
    mask = (mask != 0).long()
    old_logprobs = old_logprobs.detach()
    metrics: dict[str, float] = {}
    stats = {level: level_stats(old_logprobs, infer_logprobs, mask, level) for level in CORRECTION_LEVELS}
    for level, (ratio, diff) in stats.items():
        metrics[f"train_infer_ratio_{level}_mean"] = float(masked_mean(ratio, mask))
        metrics[f"train_infer_diff_{level}_mean"] = float(masked_mean(diff, mask))
    metrics["train_infer_kl"] = float(masked_mean(kl_penalty(old_logprobs, infer_logprobs.to(old_logprobs.dtype), "k3"), mask))
    token_ratio = stats["token"][0][mask.bool()]
    if token_ratio.numel():
        metrics["train_infer_ratio_token_max"] = float(token_ratio.max())
        metrics["train_infer_ratio_token_min"] = float(token_ratio.min())

    weight_cfg = config.is_weight
    if weight_cfg.enabled:
        is_weight = _stats_for(stats, weight_cfg.weight_type)[0]
        if weight_cfg.upper_bound is not None:
            metrics["is_weight_clipfrac"] = float(masked_mean((is_weight > weight_cfg.upper_bound).float(), mask))
            is_weight = is_weight.clamp(min=0.0, max=weight_cfg.upper_bound)
        is_weight = is_weight.detach() if weight_cfg.detach else is_weight
        metrics["is_weight_mean"] = float(masked_mean(is_weight, mask))
    else:
        is_weight = torch.ones_like(old_logprobs)

    filter_mask = torch.ones_like(mask)
    for f in config.filters:
        if not f.enabled:
            continue
        ratio, diff = _stats_for(stats, f.agg_type)
        if f.ratio_enabled:
            keep = ((ratio >= f.ratio_low) & (ratio <= f.ratio_high)).long()
            metrics[f"train_infer_{f.agg_type}_ratio_mask_mean"] = float(masked_mean(keep.float(), mask))
            filter_mask = filter_mask * keep
        if f.diff_enabled:
            keep = ((diff >= f.diff_low) & (diff <= f.diff_high)).long()
            metrics[f"train_infer_{f.agg_type}_diff_mask_mean"] = float(masked_mean(keep.float(), mask))
            filter_mask = filter_mask * keep
    if config.filters:
        metrics["train_infer_final_mask_mean"] = float(masked_mean(filter_mask.float(), mask))
    return is_weight, filter_mask, metrics


def _stats_for(stats: dict[str, tuple[Tensor, Tensor]], level: str) -> tuple[Tensor, Tensor]:
    if level not in stats:
        CORRECTION_LEVELS.get(level)  # raises, naming the registered levels
    return stats[level]
