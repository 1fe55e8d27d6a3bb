"""Per-token KL estimators and the KL coefficient controllers (docs/algorithms.md, step 7).

The estimators follow John Schulman's "Approximating KL divergence" note: with r = p_ref / p_policy
evaluated on tokens sampled from the policy, k1 = −log r, k2 = ½ (log r)², k3 = r − 1 − log r.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from roll.utils.registry import Registry

# `kl_penalty` kinds: each maps the per-token log-ratio log p_policy − log p_ref to a KL estimate.
KL_KINDS: Registry[Callable[[Tensor], Tensor]] = Registry("kl_penalty")


def register_kl_kind(name: str, *, replace: bool = False) -> Callable[[Callable[[Tensor], Tensor]], Callable[[Tensor], Tensor]]:
    """Decorator registering `fn(log_ratio [B, L]) -> kl [B, L]` as `kl_penalty: name` (also for kl_loss_type)."""
    return KL_KINDS.register(name, replace=replace)

# exp() of a log-ratio above ~88 overflows float32; clamping first keeps k3 and its gradient finite.
_LOG_RATIO_CLAMP = 20.0
# k3 grows exponentially in the log-ratio; ROLL and veRL bound it so a few wild tokens cannot dominate.
_K3_CLAMP = 10.0


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kind: str = "kl") -> Tensor:
    """Per-token estimate of KL(policy ‖ ref) from the two log-probs of the sampled token.

    `kl`: logp − ref (k1, unbiased, can be negative); `abs`: |logp − ref|; `mse`: ½(logp − ref)² (k2);
    `k3`: exp(ref − logp) − (ref − logp) − 1, non-negative, log-ratio clamped to ±20 and result to ≤ 10.
    Other kinds are whatever `register_kl_kind` added.
    """
    return KL_KINDS.get(kind)(logprobs - ref_logprobs)


@register_kl_kind("kl")
def _k1(log_ratio: Tensor) -> Tensor:
    return log_ratio


@register_kl_kind("abs")
def _abs(log_ratio: Tensor) -> Tensor:
    return log_ratio.abs()


@register_kl_kind("mse")
def _k2(log_ratio: Tensor) -> Tensor:
    return 0.5 * log_ratio.square()


@register_kl_kind("k3")
def _k3(log_ratio: Tensor) -> Tensor:
    neg = (-log_ratio).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return (torch.exp(neg) - neg - 1.0).clamp(-_K3_CLAMP, _K3_CLAMP)


class FixedKLController:
    """A constant KL coefficient (`init_kl_coef`); `update` does nothing."""

    def __init__(self, init_kl_coef: float) -> None:
        self.value = float(init_kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        return None


class AdaptiveKLController:
    """Ziegler et al. (2019) proportional controller steering the observed KL towards `target_kl`.

    value ← value · (1 + clip(current_kl / target_kl − 1, −0.2, 0.2) · n_steps / horizon);
    the ±0.2 clip keeps one noisy KL reading from moving the coefficient by more than 20 %·n/horizon.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        if target_kl <= 0 or horizon <= 0:
            raise ValueError(f"AdaptiveKLController needs target_kl > 0 and kl_horizon > 0, got {target_kl}, {horizon}")
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = float(horizon)

    def update(self, current_kl: float, n_steps: int) -> None:
        error = min(max(float(current_kl) / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon
