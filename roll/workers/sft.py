"""A supervised step for the actor (the SFT warm-up before RL, see pipeline/agentic/sft_warmup.py).

It minimises the mean negative log-likelihood of the response tokens with its own AdamW, so the RL
optimizer's moments and the lr schedule start untouched when RL begins. That AdamW's moments are
twice the weights' size (1.1 GB for a 135M model in fp32): end_sft drops them when the warm-up ends.
"""

from __future__ import annotations

import math

import torch

from roll.data.batch import Batch


def sft_step(worker, batch: Batch, learning_rate: float, max_grad_norm: float | None = 1.0) -> dict[str, float]:
    """One optimizer step of token-mean NLL over `batch`'s response tokens on this rank (and its peers)."""
    strategy = worker.strategy
    params = [p for p in strategy.model.parameters() if p.requires_grad]
    optimizer = getattr(worker, "_sft_optimizer", None)
    if optimizer is None or optimizer.param_groups[0]["lr"] != learning_rate:
        optimizer = worker._sft_optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)
    strategy.model.train()
    mask = batch.tensors["response_mask"]
    (num_tokens,) = strategy.all_reduce([float((mask != 0).sum())])
    total = 0.0
    for mb, weight in worker.plan_micro_batches(batch, train=True):
        response_mask = mb.gather(mask)
        # chunked through the output layer, which runs on the response tokens alone
        logprobs = worker.token_outputs(mb, with_entropy=False, token_mask=response_mask)["logprobs"]
        token_mask = response_mask.to(logprobs.device).float()
        loss = -(logprobs * token_mask).sum() / max(num_tokens, 1.0)
        strategy.backward(loss * weight)
        total += float(loss.detach()) * weight
    limit = max_grad_norm if max_grad_norm and max_grad_norm > 0 else math.inf
    norm = torch.nn.utils.clip_grad_norm_(params, limit)
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    (loss_sum,) = strategy.all_reduce([total])
    return {"sft/loss": loss_sum, "sft/grad_norm": float(norm), "sft/tokens": num_tokens}


def end_sft(worker) -> None:
    """Drops the warm-up's optimizer and its moments; a later sft_step builds a fresh one."""
    worker.__dict__.pop("_sft_optimizer", None)
