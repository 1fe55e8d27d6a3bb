"""Response-level reward shaping (docs/algorithms.md, step 6) and placing rewards on tokens (step 7).

Scores are one number per trajectory (`[B]`). Normalisation compares each score with the others
in its group (a GRPO group, a tag, the whole batch); clipping bounds the result.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Callable

import torch
from torch import Tensor

from roll.utils.registry import Registry

# `reward_normalization.norm_mean_type` / `norm_std_type`: which statistics shift / scale (None: none).
NORM_TYPES = ("batch", "group", None)
# A method: fn(scores [B] float64, groups (one key per score), eps) -> normalised [B].
NormFn = Callable[[Tensor, Sequence[Hashable], float], Tensor]
NORM_METHODS: Registry[NormFn] = Registry("reward_normalization.method")


def register_norm_method(name: str, *, replace: bool = False) -> Callable[[NormFn], NormFn]:
    """Decorator registering `fn(scores, groups, eps) -> rewards` as `reward_normalization.method: name`."""
    return NORM_METHODS.register(name, replace=replace)


def _group_index(groups: Sequence[Hashable], device: torch.device) -> tuple[Tensor, int]:
    ids: dict[Hashable, int] = {}
    index = [ids.setdefault(g, len(ids)) for g in groups]
    return torch.tensor(index, dtype=torch.long, device=device), len(ids)


def _group_stats(x: Tensor, index: Tensor, n_groups: int) -> tuple[Tensor, Tensor]:
    """Each sample's group mean and unbiased group std (NaN for a group of one)."""
    count = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add_(0, index, torch.ones_like(x))
    mean = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add_(0, index, x) / count
    sq = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add_(0, index, (x - mean[index]) ** 2)
    # A group of one has no unbiased std; NaN here is turned into the degenerate-group 0 below.
    std = torch.where(count > 1, sq / (count - 1).clamp(min=1), torch.full_like(sq, float("nan"))).sqrt()
    return mean[index], std[index]


def normalize_rewards(
    scores: Tensor,
    groups: Sequence[Hashable],
    method: str = "mean_std",
    norm_mean_type: str | None = None,
    norm_std_type: str | None = None,
    eps: float = 1e-6,
) -> Tensor:
    """Normalise one score per trajectory within its group.

    `groups[i]` is trajectory i's group key (its `traj_group_id`, its tag, or one constant for
    `grouping: batch`). `method`: `identity` (unchanged), `mean` (x − group mean), `mean_std`
    ((x − group mean) / (group std + eps), std unbiased), `asym_clip` (the same as mean_std: in ROLL's
    reward normalisation the method only picks the mean and std types, and asym_clip picks mean_std's);
    further methods are whatever `register_norm_method` added. `norm_mean_type` / `norm_std_type`
    (`batch`, `group`) choose the mean subtracted and the std divided by; when only one is set, the
    other is filled from a built-in `method` (ROLL's rule).
    Degenerate rules (ROLL's): wherever a std is divided by, a trajectory alone in its group, or one
    whose std is ≈ 0 (≤ eps), gets 0 — identical rewards carry no signal. Without a std, every
    trajectory gets x − mean (a lone one: 0 with the group mean, x − batch mean with the batch mean).
    """
    if scores.dim() != 1 or len(groups) != scores.shape[0]:
        raise ValueError(f"scores must be [B] with one group key each; got {tuple(scores.shape)} and {len(groups)} keys")
    normalize = NORM_METHODS.get(method)
    for name, value in (("norm_mean_type", norm_mean_type), ("norm_std_type", norm_std_type)):
        if value not in NORM_TYPES:
            raise ValueError(f"reward_normalization.{name} must be one of {NORM_TYPES}, got {value!r}")
    if scores.numel() == 0:
        return scores.clone()
    x = scores.to(torch.float64)
    if norm_mean_type is None and norm_std_type is None:
        out = normalize(x, groups, eps)
    else:
        default_mean, default_std = METHOD_TYPES.get(method, (None, None))
        out = _shift_and_scale(x, groups, norm_mean_type or default_mean, norm_std_type or default_std, eps)
    return out.to(scores.dtype)


def _shift_and_scale(x: Tensor, groups: Sequence[Hashable], mean_type: str | None, std_type: str | None, eps: float) -> Tensor:
    """x minus its group / batch mean, divided by its group / batch std (the degenerate rule applied)."""
    if mean_type is None and std_type is None:
        return x.clone()
    index, n_groups = _group_index(groups, x.device)
    group_mean, group_std = _group_stats(x, index, n_groups)
    batch_mean, batch_std = _group_stats(x, torch.zeros_like(index), 1)
    alone = torch.isnan(group_std)  # the only member of its group
    shifted = x - {"group": group_mean, "batch": batch_mean, None: torch.zeros_like(x)}[mean_type]
    if std_type is None:
        return shifted
    std = group_std if std_type == "group" else batch_std
    degenerate = alone | torch.isnan(std) | (std <= eps)
    return torch.where(degenerate, torch.zeros_like(x), shifted / (torch.nan_to_num(std) + eps))


# The (mean, std) types of the built-in methods: the one of a pair left unset is filled from these.
METHOD_TYPES: dict[str, tuple[str | None, str | None]] = {
    "identity": (None, None), "mean": ("group", None), "mean_std": ("group", "group"), "asym_clip": ("group", "group"),
}


@register_norm_method("identity")
def _identity(x: Tensor, groups: Sequence[Hashable], eps: float) -> Tensor:
    return x.clone()


@register_norm_method("mean")
def _group_mean(x: Tensor, groups: Sequence[Hashable], eps: float) -> Tensor:
    return _shift_and_scale(x, groups, "group", None, eps)


@register_norm_method("mean_std")
def _group_mean_std(x: Tensor, groups: Sequence[Hashable], eps: float) -> Tensor:
    return _shift_and_scale(x, groups, "group", "group", eps)


@register_norm_method("asym_clip")
def _asym_clip(x: Tensor, groups: Sequence[Hashable], eps: float) -> Tensor:
    """ROLL's asym_clip: its name is kept, its [−1, 3] clamp is gone from ROLL's reward normalisation
    (the method only selects mean_std's types), so it is mean_std."""
    return _shift_and_scale(x, groups, "group", "group", eps)


def clip_rewards(rewards: Tensor, clip: float | None) -> tuple[Tensor, float]:
    """Clamp rewards to [−clip, clip]; returns them and the fraction that was clipped (0 when clip is None)."""
    if clip is None or rewards.numel() == 0:
        return rewards, 0.0
    fraction = float((rewards.abs() > clip).to(torch.float64).mean())
    return rewards.clamp(-clip, clip), fraction


def last_response_index(response_mask: Tensor) -> Tensor:
    """Position of each row's last response token ([B], −1 for a row without one); any padding side."""
    positions = torch.arange(response_mask.shape[-1], device=response_mask.device).expand_as(response_mask)
    return torch.where(response_mask != 0, positions, torch.full_like(positions, -1)).max(dim=-1).values


def token_level_rewards(
    response_level_rewards: Tensor,
    response_mask: Tensor,
    kl: Tensor | None = None,
    kl_coef: float = 0.0,
) -> Tensor:
    """`[B, L]` rewards: each row's reward on its last response token, minus `kl_coef · kl` per response token.

    "Last" means the highest position with response_mask = 1, so right- and left-padded rows and
    multi-turn rows (several response segments) all get the episode score at the end of the final
    response (docs/rollout.md, "Exact tokens"). A row without response tokens gets no reward (nothing can be credited).
    Non-response positions are always 0.
    """
    dtype = response_level_rewards.dtype if response_level_rewards.is_floating_point() else torch.float32
    out = torch.zeros(response_mask.shape, dtype=dtype, device=response_mask.device)
    last = last_response_index(response_mask)
    rows = torch.nonzero(last >= 0).squeeze(-1)
    out[rows, last[rows]] = response_level_rewards.to(dtype)[rows]
    if kl is not None and kl_coef != 0.0:
        out = out - kl_coef * torch.where(response_mask != 0, kl.to(dtype), torch.zeros((), dtype=dtype, device=out.device))
    return out
