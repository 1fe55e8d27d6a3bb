"""Reductions over the tokens a mask selects.

Every per-token tensor in roll is `[B, L]` with a 0/1 mask beside it (usually `response_mask`).
These helpers never return NaN: an empty selection gives 0 (mean, variance) or leaves the input
unchanged (whitening), because an all-padding micro-batch is a normal event, not an error.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _select(x: Tensor, mask: Tensor) -> Tensor:
    # `where` before any arithmetic: a masked-out position may hold inf/NaN (e.g. a log-prob of
    # padding); inf * 0 would poison the sum, and any op applied to it first would poison the gradient.
    return torch.where(mask != 0, x, torch.zeros((), dtype=x.dtype, device=x.device)) * mask.to(x.dtype)


def _safe_count(count: Tensor) -> Tensor:
    # Dividing by a clamped count (not dividing then masking) keeps the backward pass NaN-free too.
    return torch.where(count > 0, count, torch.ones_like(count))


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of `x` over the positions where `mask` is non-zero (weighted by `mask`)."""
    selected = _select(x, mask)
    return selected.sum() if dim is None else selected.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of `x` over the masked positions; 0 where the mask selects nothing."""
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim)
    return masked_sum(x, mask, dim) / _safe_count(count)


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True, dim: int | None = None) -> Tensor:
    """Variance of `x` over the masked positions (Bessel-corrected when `unbiased`).

    A selection too small to define the variance (0 tokens, or 1 token when unbiased) gives 0.
    """
    m = mask.to(x.dtype)
    dims = tuple(range(x.dim())) if dim is None else (dim,)
    count = m.sum(dims, keepdim=True)
    mean = _select(x, m).sum(dims, keepdim=True) / _safe_count(count)
    sq = _select((_select(x, m != 0) - mean) ** 2, m).sum(dims, keepdim=True)
    denom = count - 1 if unbiased else count
    var = torch.where(denom > 0, sq / _safe_count(denom), torch.zeros_like(sq))
    return var.reshape(()) if dim is None else var.squeeze(dim)


def masked_whiten(x: Tensor, mask: Tensor, eps: float = 1e-8, shift_mean: bool = True) -> Tensor:
    """(x − mean) / sqrt(var + eps) with mean and unbiased var over the masked positions.

    With `shift_mean=False` the mean is added back (scale only). Whitening one value (or none) is
    meaningless, so with ≤ 1 selected token `x` is returned unchanged. Masked-out positions are
    transformed too; callers multiply by the mask afterwards.
    """
    if int((mask != 0).sum()) <= 1:
        return x
    mean = masked_mean(x, mask)
    var = masked_var(x, mask, unbiased=True)
    whitened = (x - mean) * torch.rsqrt(var + eps)
    return whitened if shift_mean else whitened + mean
