"""Choosing the next token of each row of a decode step: greedy, temperature, top-k, top-p.

Each request samples with its own `torch.Generator` (seeded from its `SamplingParams.seed`), so a
request draws the same tokens whatever else shares its batch. A row costs one uniform number from its
generator; the draw itself is batched: the rows' kept probabilities are summed up (a cumulative
distribution, in float64) and each row takes the first token whose running sum passes its number
times the row's total (inverse-CDF sampling). That is the exact distribution, and far cheaper on a CPU
than the usual per-row `torch.multinomial` over a sorted vocabulary: 32 rows of SmolLM2's 49,152
tokens took 104 ms a step that way (a full sort 66, 32 multinomial draws 34), beside about 170 ms for
the decode step's forward pass at that batch; this way takes 9 ms.

Nothing is sorted unless a rule needs it: top-k takes its k best (`torch.topk`); top-p keeps the
smallest set of most likely tokens whose mass reaches `top_p`, and first looks for it among the 64
best, sorting the whole vocabulary only for rows where those 64 fall short of `top_p`.
"""

from __future__ import annotations

import torch

from roll.strategies.generation import SamplingParams

NUCLEUS_FIRST_LOOK = 64  # top-p's candidates before a full sort (a peaked model's nucleus is rarely larger)


def sample_tokens(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]):
    """Chooses one token per row and returns (tokens [B], raw log-probs [B]): the log-probs are the
    model's own log-softmax at the chosen token, before temperature, top-k and top-p. Rows with equal
    sampling parameters are processed together (the common case is one group for the whole batch).
    A sampling row without a generator draws from torch's global one."""
    logp = torch.log_softmax(logits, dim=-1)
    tokens = torch.empty(logits.shape[0], dtype=torch.long, device=logits.device)
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(params):
        key = ("greedy",) if p.greedy else (p.temperature, p.top_k, p.top_p)
        groups.setdefault(key, []).append(i)
    for key, rows in groups.items():
        idx = torch.tensor(rows, device=logits.device)
        group = logits if len(rows) == len(params) else logits[idx]  # one group: no copy
        if key == ("greedy",):
            tokens[idx] = group.argmax(dim=-1)
            continue
        temperature, top_k, top_p = key
        probs, candidates = kept_probabilities(group.float() / temperature if temperature != 1 else group.float(),
                                               top_k, top_p)
        # a request's generator is a CPU one (the same draw on any device), so its number is drawn there
        uniform = torch.cat([torch.rand(1, generator=generators[row], dtype=torch.float64) for row in rows])
        choice = inverse_cdf(probs, uniform.to(probs.device))
        tokens[idx] = choice if candidates is None else candidates.gather(1, choice[:, None])[:, 0]
    return tokens, logp.gather(1, tokens[:, None])[:, 0]


def kept_probabilities(scaled: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(probabilities [B, N], candidates [B, N] or None): what top-k and top-p keep of each row's
    softmax, unnormalised, dropped tokens at 0. `candidates` maps column to token id; None means the
    columns are the vocabulary itself (no rule applied, nothing sorted). Top-p applies to the top-k's
    renormalised mass, as in vLLM and transformers."""
    probs = torch.softmax(scaled, dim=-1)
    vocab = probs.shape[-1]
    candidates = None
    if 0 < top_k < vocab:
        probs, candidates = torch.topk(probs, top_k, dim=-1)  # sorted, most likely first
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p < 1.0:
        if candidates is None:
            look = min(NUCLEUS_FIRST_LOOK, vocab)
            best, best_ids = torch.topk(probs, look, dim=-1)
            if look < vocab and bool((best.sum(dim=-1) < top_p).any()):
                best, best_ids = torch.sort(probs, dim=-1, descending=True)
            probs, candidates = best, best_ids
        # keep the smallest prefix whose mass reaches top_p (always at least the most likely token)
        drop = (probs.cumsum(dim=-1) - probs) >= top_p
        probs = probs.masked_fill(drop, 0.0)
    return probs, candidates


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Per row the column where the cumulative sum of `probs` [B, N] first passes `uniform` [B] (in
    [0, 1)) times the row's total: column j with probability probs[j] / total, never a column at 0."""
    cdf = probs.double().cumsum(dim=-1)
    total = cdf[:, -1:]
    if not bool(((total > 0) & torch.isfinite(total)).all()):
        raise ValueError("sampling: a row's probabilities sum to 0 or are not finite (NaN or inf in the model's logits)")
    # strictly below the total, so some column's running sum passes it; a column at 0 adds nothing to
    # the sum and so is never the first to pass it
    target = torch.minimum(uniform[:, None] * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, target, right=True)[:, 0]
