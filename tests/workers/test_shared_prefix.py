"""A micro-batch's shared prompts run once (roll/strategies/shared_prefix.py): the same hidden states,
log-probs, gradients and updates as running every row in full, with fewer tokens through the model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.configs.worker_config import ModelArgs
from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch, rows_micro_batch, sample_lengths, split_padded
from roll.data.sequence_packing import split_packed
from roll.distributed import Cluster
from roll.strategies.shared_prefix import (
    MIN_SHARED_TOKENS, forward_in_prefix_groups, forward_with_shared_prefix, plan_prefix_groups,
)
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, max_abs_diff

LENGTHS = [40, 33, 37, 29, 40, 31]


def prompt_batch(prefix: int, lengths: list[int] = LENGTHS, vocab: int = 300) -> Batch:
    """Right-padded samples that all start with the same `prefix` tokens (an instruction), then differ
    (a board); the last 5 tokens of each are the response, with random advantages."""
    g = torch.Generator().manual_seed(3)
    n, width = len(lengths), max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(5, vocab, (n, width), generator=g)
    ids[:, :prefix] = ids[0, :prefix]
    ids = ids * mask
    response = torch.zeros_like(mask)
    for i, n_tokens in enumerate(lengths):
        response[i, n_tokens - 5 : n_tokens] = 1
    return Batch({"input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(width).expand(n, width) * mask,
                  "response_mask": response, "advantages": torch.randn(n, width, generator=g) * response})


def two_prompt_batch(vocab: int = 300) -> Batch:
    """GRPO's shape: rows 0, 2, 4 answer one prompt and rows 1, 3, 5 another; all six share 20 tokens (a
    system prompt) and each trio 34 (its question)."""
    batch = prompt_batch(prefix=20, vocab=vocab)
    ids = batch.tensors["input_ids"]
    for first in (0, 1):
        ids[first + 2 :: 2, 20:34] = ids[first, 20:34]
    return batch


def whole(batch: Batch) -> MicroBatch:
    """The batch as one micro-batch, rows in batch order (split_padded orders rows by their tokens)."""
    return rows_micro_batch(batch, list(range(len(batch))), batch.tensors["input_ids"].shape[1],
                            sample_lengths(batch.tensors["attention_mask"]))


def plan(mb) -> list[tuple[list[int], int, int]] | None:
    groups = plan_prefix_groups(mb)
    return None if groups is None else [(g.rows, g.prefix, g.width) for g in groups]


def test_the_plan_shares_each_prompt_where_it_pays_and_rows_allow():
    assert plan(whole(prompt_batch(prefix=24))) == [([0, 1, 2, 3, 4, 5], 24, 40)]
    # never the whole of the shortest sample: each row keeps a token to run
    assert plan(whole(prompt_batch(prefix=29, lengths=[29, 40]))) == [([0, 1], 28, 40)]
    assert plan(whole(prompt_batch(prefix=MIN_SHARED_TOKENS - 1))) is None
    assert plan(split_padded(prompt_batch(prefix=24), 1)[0]) is None  # one row: nothing to share
    assert all(plan(mb) is None for mb in split_packed(prompt_batch(prefix=24), 80))  # packed rows hold several samples
    # two prompts in one micro-batch: each trio runs its prompt once, on its own columns (the second
    # trio's shortest sample has 29 tokens, its longest 33): 52 + 43 tokens and one more group, against
    # 140 sharing only the system prompt
    assert plan(whole(two_prompt_batch())) == [([0, 2, 4], 34, 40), ([1, 3, 5], 28, 33)]


@pytest.mark.parametrize("arch, prompts", [("qwen2", 1), ("llama", 1), ("qwen2", 2)])
def test_hidden_states_and_gradients_equal_the_plain_forward(arch, prompts, tiny_model_dir, tiny_llama_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir if arch == "qwen2" else tiny_llama_dir, dtype=torch.float32)
    model.train()
    vocab = model.config.vocab_size
    batch = prompt_batch(prefix=24, vocab=vocab) if prompts == 1 else two_prompt_batch(vocab=vocab)
    mb = whole(batch)
    inputs = {"input_ids": mb.input_ids, "position_ids": mb.position_ids}
    real = batch.tensors["attention_mask"].bool()
    weights = torch.randn(*mb.input_ids.shape, model.config.vocab_size) * real[..., None]

    def run(shared: bool):
        model.zero_grad()
        if not shared:
            logits = model(**inputs, use_cache=False).logits
        elif prompts == 1:
            logits = forward_with_shared_prefix(model, inputs, 24)
        else:
            logits = forward_in_prefix_groups(model, inputs, plan_prefix_groups(mb))
        (logits * weights).sum().backward()
        return logits.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    (plain, plain_grads), (shared, shared_grads) = run(False), run(True)
    assert torch.allclose(shared[real], plain[real], atol=1e-5)
    assert plain_grads.keys() == shared_grads.keys() and len(plain_grads) > 0
    for name, grad in plain_grads.items():
        scale = float(grad.abs().max())
        assert float((shared_grads[name] - grad).abs().max()) <= 1e-5 * max(scale, 1.0), name


def tokens_through_the_model(worker) -> list[int]:
    """Counts the tokens each forward call embeds."""
    counts: list[int] = []
    worker.strategy.model.get_input_embeddings().register_forward_hook(lambda m, args, out: counts.append(args[0].numel()))
    return counts


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_actor_scores_and_updates_as_without_sharing_on_fewer_tokens(tiny_model_dir, lora_rank):
    batch = prompt_batch(prefix=24)
    cfg = LossConfig(mini_batch_size=6, entropy_loss_coef=0.01, max_grad_norm=None, shuffle=False)
    width = batch.tensors["input_ids"].shape[1]

    def run(gradient_checkpointing: bool):
        # Under gradient checkpointing transformers runs no KV cache in training, so rows run in full there.
        config = actor_config(tiny_model_dir)
        config = dataclasses.replace(config, model_args=ModelArgs(model_name_or_path=str(tiny_model_dir), lora_rank=lora_rank,
                                                                  disable_gradient_checkpointing=not gradient_checkpointing))
        cluster = Cluster("shared", ActorWorker, config, executor="local")
        try:
            worker = cluster.hosts[0].worker
            counts = tokens_through_the_model(worker)
            logprobs = cluster.execute_rank0("compute_log_probs", batch, response_only=True)["logprobs"]
            scored = list(counts)
            counts.clear()
            metrics = cluster.execute_rank0("train_step", batch, cfg)
            return logprobs, scored, metrics, list(counts), cluster.execute_rank0("get_state_dict")
        finally:
            cluster.shutdown()

    shared = run(gradient_checkpointing=False)
    full = run(gradient_checkpointing=True)
    # micro-batches take the rows in the order of their tokens; each runs the 24 shared tokens once and
    # the rest of each row up to the longest row of the micro-batch
    ids = batch.tensors["input_ids"]
    order = sorted(range(6), key=lambda i: ids[i, :LENGTHS[i]].tolist())
    triples = [max(LENGTHS[j] for j in order[i : i + 3]) for i in range(0, 6, 3)]
    pairs = [max(LENGTHS[j] for j in order[i : i + 2]) for i in range(0, 6, 2)]
    # scoring shares in both (no gradients, no checkpointing): micro-batches of 3 rows (infer_batch_size)
    assert shared[1] == full[1] == [n for longest in triples for n in (24, 3 * (longest - 24))]
    assert torch.allclose(shared[0], full[0], atol=1e-5)
    # training: 3 micro-batches of 2 rows, vs every row in full
    assert shared[3] == [n for longest in pairs for n in (24, 2 * (longest - 24))] and full[3] == [2 * width] * 3
    assert max_abs_diff(shared[4], full[4]) < 1e-5
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm"):
        assert shared[2][key] == pytest.approx(full[2][key], rel=1e-5, abs=1e-6), key
