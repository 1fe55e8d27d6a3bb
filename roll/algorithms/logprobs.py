"""Log-probabilities and entropies from logits without a full-vocabulary copy per token.

The naive `log_softmax(logits).gather(labels)` materialises a second [N, V] tensor (kept alive by
autograd for the backward pass), and in float32 when the logits are bf16 — for 8×1024 tokens and a
50k vocabulary that is 1.6 GB on top of the logits. Here the forward pass walks the tokens in chunks
of ~16M logits, keeping only one chunk's float32 temporaries, and saves only the logits it was given
(no copy) plus one float per token; the backward pass rebuilds softmax chunk by chunk and writes
straight into the logits' gradient. benchmarks/logprob_memory.py measures the difference.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

# Logits per chunk: big enough for fast kernels, small enough (64 MB in float32) to be negligible.
CHUNK_ELEMENTS = 1 << 24


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def token_chunks(n_tokens: int, vocab: int, chunk_tokens: int | None) -> Iterator[slice]:
    step = chunk_tokens or max(1, CHUNK_ELEMENTS // max(vocab, 1))
    for start in range(0, n_tokens, step):
        yield slice(start, min(start + step, n_tokens))


def _as_rows(x: Tensor, vocab_dim: bool) -> Tensor:
    """View [..., T(, V)] as [R, T(, V)] so chunks are slices of one leading row (never a full copy
    for the usual [B, L, V] or its shifted slice logits[:, :-1])."""
    core = 2 if vocab_dim else 1
    if x.dim() < core + 1:
        return x.reshape((1,) * (core + 1 - x.dim()) + tuple(x.shape))
    return x.flatten(0, x.dim() - core - 1) if x.dim() > core + 1 else x


class _LogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, labels: Tensor, chunk_tokens: int | None) -> Tensor:
        rows, rows_labels = _as_rows(logits, True), _as_rows(labels, False)
        cdtype = compute_dtype(logits.dtype)
        out = torch.empty(rows_labels.shape, dtype=cdtype, device=logits.device)
        lse = torch.empty_like(out)
        for r in range(rows.shape[0]):
            for s in token_chunks(rows.shape[1], rows.shape[2], chunk_tokens):
                z = rows[r, s].to(cdtype)
                lse[r, s] = torch.logsumexp(z, dim=-1)
                out[r, s] = z.gather(-1, rows_labels[r, s].unsqueeze(-1)).squeeze(-1) - lse[r, s]
        ctx.save_for_backward(logits, labels, lse)
        ctx.chunk_tokens = chunk_tokens
        return out.reshape(labels.shape)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        logits, labels, lse = ctx.saved_tensors
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        rows, rows_labels, rows_grad = _as_rows(logits, True), _as_rows(labels, False), _as_rows(grad, True)
        g_rows = _as_rows(grad_out.reshape(labels.shape), False)
        for r in range(rows.shape[0]):
            for s in token_chunks(rows.shape[1], rows.shape[2], ctx.chunk_tokens):
                # d log p_y / dz = onehot(y) − softmax(z)
                g = g_rows[r, s].to(lse.dtype).unsqueeze(-1)
                chunk = -g * torch.exp(rows[r, s].to(lse.dtype) - lse[r, s].unsqueeze(-1))
                chunk.scatter_add_(-1, rows_labels[r, s].unsqueeze(-1), g)
                rows_grad[r, s] = chunk.to(grad.dtype)
        return grad, None, None


class _Entropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, chunk_tokens: int | None) -> Tensor:
        rows = _as_rows(logits, True)
        cdtype = compute_dtype(logits.dtype)
        entropy = torch.empty(rows.shape[:2], dtype=cdtype, device=logits.device)
        lse = torch.empty_like(entropy)
        for r in range(rows.shape[0]):
            for s in token_chunks(rows.shape[1], rows.shape[2], chunk_tokens):
                z = rows[r, s].to(cdtype)
                lse[r, s] = torch.logsumexp(z, dim=-1)
                p = torch.exp(z - lse[r, s].unsqueeze(-1))
                # H = logsumexp(z) − E_p[z]; never log(p), which is −inf for underflowed probabilities.
                entropy[r, s] = lse[r, s] - (p * z).sum(-1)
        ctx.save_for_backward(logits, lse, entropy)
        ctx.chunk_tokens = chunk_tokens
        return entropy.reshape(logits.shape[:-1])

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        logits, lse, entropy = ctx.saved_tensors
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        rows, rows_grad = _as_rows(logits, True), _as_rows(grad, True)
        g_rows = grad_out.reshape(entropy.shape)
        for r in range(rows.shape[0]):
            for s in token_chunks(rows.shape[1], rows.shape[2], ctx.chunk_tokens):
                # dH/dz = −p ⊙ (z − E_p[z]), and E_p[z] = logsumexp(z) − H
                z = rows[r, s].to(lse.dtype)
                p = torch.exp(z - lse[r, s].unsqueeze(-1))
                expected = (lse[r, s] - entropy[r, s]).unsqueeze(-1)
                rows_grad[r, s] = (-g_rows[r, s].to(lse.dtype).unsqueeze(-1) * p * (z - expected)).to(grad.dtype)
        return grad, None


def logprobs_from_logits(logits: Tensor, labels: Tensor, chunk_tokens: int | None = None) -> Tensor:
    """log softmax(logits)[..., labels] for logits [..., V] and labels [...]; float32 (or float64).

    Differentiable with respect to `logits`; memory beyond the logits and their gradient is one
    chunk of `chunk_tokens` tokens (default: ~16M logits' worth).
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} disagree on the leading dims")
    return _LogProbs.apply(logits, labels.long(), chunk_tokens)


def entropy_from_logits(logits: Tensor, chunk_tokens: int | None = None) -> Tensor:
    """Entropy of softmax(logits) over the last dim, [...]; differentiable, chunked like logprobs_from_logits."""
    return _Entropy.apply(logits, chunk_tokens)


def logprobs_for_input_ids(logits: Tensor, input_ids: Tensor, chunk_tokens: int | None = None) -> Tensor:
    """Token-aligned log-probs (docs/internals.md): out[b, t] = log p(input_ids[b, t] | input_ids[b, :t]), 0 at t = 0.

    `logits[b, t]` is the model's prediction for position t + 1 (a causal LM's output).
    """
    shifted = logprobs_from_logits(logits[:, :-1], input_ids[:, 1:], chunk_tokens)
    return torch.nn.functional.pad(shifted, (1, 0))


def entropy_for_input_ids(logits: Tensor, chunk_tokens: int | None = None) -> Tensor:
    """Token-aligned entropy: out[b, t] is the entropy of the distribution input_ids[b, t] was drawn from; 0 at t = 0."""
    return torch.nn.functional.pad(entropy_from_logits(logits[:, :-1], chunk_tokens), (1, 0))
