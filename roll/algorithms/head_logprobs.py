"""Token log-probs (and entropies) from the last hidden states and the output layer, chunk by chunk, so
the trainer never holds `[tokens, vocab]` logits.

logprobs.py already avoids a second vocabulary-sized copy, but it starts from logits the model made in
one piece, and autograd keeps them for backward together with their gradient: for 8×1024 tokens and
a 49k vocabulary that is 1.6 GB each in float32. Here the output layer itself runs inside the chunk
loop: the forward pass keeps only the hidden states it was given and two floats per token, and the
backward pass recomputes each chunk's logits, turns them into the gradient of the hidden states and
accumulates the weight's gradient. Peak memory beyond the model is one chunk of logits.

The arithmetic is the same as `lm_head` then logprobs.py: logits = hidden·Wᵀ (+ b) in the compute
dtype (bf16 under mixed precision, as autocast does), softmax statistics in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from roll.algorithms.logprobs import token_chunks, compute_dtype


def _chunk_logits(hidden: Tensor, weight: Tensor, bias: Tensor | None, dtype: torch.dtype) -> Tensor:
    """One chunk's logits: the matmul in `dtype`, the result in float32 (float64 stays float64)."""
    z = F.linear(hidden.to(dtype), weight, None if bias is None else bias.to(dtype))
    return z.to(compute_dtype(dtype))


class _HeadLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, labels: Tensor, with_entropy: bool,
                dtype: torch.dtype, chunk_tokens: int | None) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)  # an unused output (the entropy of a metric) gets no gradient pass
        n, vocab = hidden.shape[0], weight.shape[0]
        w = weight.to(dtype)
        logp = torch.empty(n, dtype=compute_dtype(dtype), device=hidden.device)
        lse = torch.empty_like(logp)
        entropy = torch.empty_like(logp) if with_entropy else logp.new_empty(0)
        for s in token_chunks(n, vocab, chunk_tokens):
            z = _chunk_logits(hidden[s], w, bias, dtype)
            lse[s] = torch.logsumexp(z, dim=-1)
            logp[s] = z.gather(-1, labels[s].unsqueeze(-1)).squeeze(-1) - lse[s]
            if with_entropy:  # H = logsumexp(z) − E_p[z]; the row dot product makes no third chunk-sized tensor
                p = torch.exp(z - lse[s].unsqueeze(-1))
                entropy[s] = lse[s] - (p.unsqueeze(-2) @ z.unsqueeze(-1)).view(-1)
        ctx.save_for_backward(hidden, weight, bias, labels, lse, entropy)
        ctx.dtype, ctx.chunk_tokens = dtype, chunk_tokens
        return logp, entropy

    @staticmethod
    def backward(ctx, g_logp: Tensor | None, g_entropy: Tensor | None):
        hidden, weight, bias, labels, lse, entropy = ctx.saved_tensors
        dtype = ctx.dtype
        w = weight.to(dtype)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(hidden) if need_h else None
        stats = lse.dtype
        grad_w = torch.zeros(weight.shape, dtype=stats, device=weight.device) if need_w else None
        grad_b = torch.zeros(weight.shape[0], dtype=stats, device=weight.device) if need_b else None
        for s in token_chunks(hidden.shape[0], weight.shape[0], ctx.chunk_tokens):
            # in place where possible: at most two chunk-sized float32 tensors at a time
            z = _chunk_logits(hidden[s], w, bias, dtype)
            entropy_term = None
            if g_entropy is not None:  # dH/dz = −p ⊙ (z − E_p[z]), E_p[z] = logsumexp(z) − H
                entropy_term = z - (lse[s] - entropy[s]).unsqueeze(-1)
            dz = z.sub_(lse[s].unsqueeze(-1)).exp_()  # p, in z's memory
            if entropy_term is not None:
                entropy_term.mul_(dz).mul_(g_entropy[s].to(stats).unsqueeze(-1))
            if g_logp is not None:  # d log p_y / dz = onehot(y) − p
                g = g_logp[s].to(stats).unsqueeze(-1)
                dz.mul_(-g).scatter_add_(-1, labels[s].unsqueeze(-1), g)
            else:
                dz.zero_()
            if entropy_term is not None:
                dz.sub_(entropy_term)
            dz_c = dz.to(dtype)
            if need_h:
                grad_h[s] = (dz_c @ w).to(hidden.dtype)
            if need_w:
                grad_w += (dz_c.t() @ hidden[s].to(dtype)).to(stats)
            if need_b:
                grad_b += dz.sum(0)
        grad_w = grad_w.to(weight.dtype) if need_w else None
        grad_b = grad_b.to(bias.dtype) if need_b else None
        return grad_h, grad_w, grad_b, None, None, None, None


def head_logprobs_for_input_ids(hidden: Tensor, head: torch.nn.Linear, input_ids: Tensor, with_entropy: bool = False,
                                dtype: torch.dtype = torch.float32,
                                chunk_tokens: int | None = None,
                                label_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """Token-aligned log-probs `[B, T]` (and entropies, or None) of `input_ids` `[B, T]` from the final
    hidden states `[B, T, H]` and the output layer `head` (vocab × H), as
    `logprobs_for_input_ids(head(hidden), input_ids)` gives them: 0 at t = 0. Differentiable with
    respect to the hidden states and the head's parameters; `dtype` is the matmul's (bf16 under mixed
    precision), softmax statistics are float32.

    `label_mask` `[B, T]`: only the tokens where it is nonzero get a log-prob (and entropy), the rest 0.
    RL trains on the response alone, and in a one-turn agent prompt the response is 7 tokens of 125:
    the output layer (a fifth of SmolLM2-135M's forward FLOPs) and its softmax then run on 6% of them."""
    if hidden.shape[:2] != input_ids.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} and input_ids {tuple(input_ids.shape)} disagree on [B, T]")
    if label_mask is not None and label_mask.shape != input_ids.shape:
        raise ValueError(f"label_mask {tuple(label_mask.shape)} and input_ids {tuple(input_ids.shape)} disagree on [B, T]")
    rows, width = input_ids.shape
    flat_hidden = hidden[:, :-1].reshape(rows * (width - 1), hidden.shape[-1])
    labels = input_ids[:, 1:].reshape(-1).long()
    picked = None
    if label_mask is not None:
        picked = label_mask[:, 1:].reshape(-1).nonzero().squeeze(-1).to(hidden.device)
        flat_hidden, labels = flat_hidden.index_select(0, picked), labels.index_select(0, picked)
    logp, entropy = _HeadLogProbs.apply(flat_hidden, head.weight, head.bias, labels, with_entropy, dtype, chunk_tokens)

    def aligned(values: Tensor) -> Tensor:
        if picked is not None:
            values = values.new_zeros(rows * (width - 1)).index_copy(0, picked, values)
        return F.pad(values.view(rows, width - 1), (1, 0))

    return aligned(logp), (aligned(entropy) if with_entropy else None)
