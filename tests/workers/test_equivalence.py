"""Dynamic batching and sequence packing change only the layout: log-probs, values, losses and
gradients (seen through the updated weights and grad norm) equal plain padding's to 1e-5 in fp32."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from roll.workers.critic_worker import CriticWorker
from tests.workers.helpers import actor_config, make_batch, max_abs_diff

LAYOUTS = {
    "plain": {},
    "one_micro_batch": {"training_args_per_device": 8},
    "dynamic": dict(use_dynamic_batching_in_train=True, max_tokens_per_microbatch_in_train=96, sequence_length_round_in_train=8,
                    use_dynamic_batching_in_infer=True, max_tokens_per_microbatch_in_infer=80, sequence_length_round_in_infer=16),
    "packing": dict(use_sequence_packing=True, max_tokens_per_microbatch_in_train=60, max_tokens_per_microbatch_in_infer=45),
}


def layout_config(model_dir, layout):
    overrides = dict(LAYOUTS[layout])
    config = actor_config(model_dir)
    if overrides.pop("training_args_per_device", None):
        config.training_args = dataclasses.replace(config.training_args, per_device_train_batch_size=8, gradient_accumulation_steps=1)
    return dataclasses.replace(config, **overrides)


def run_layout(worker_cls, model_dir, layout, method):
    cluster = Cluster(layout, worker_cls, layout_config(model_dir, layout), executor="local")
    try:
        return method(cluster)
    finally:
        cluster.shutdown()


def test_log_probs_and_values_equal_across_layouts(tiny_model_dir):
    batch = make_batch()
    mask = batch.tensors["attention_mask"]
    for worker_cls, method, key in [(ActorWorker, "compute_log_probs", "logprobs"), (CriticWorker, "compute_values", "values")]:
        results = {layout: run_layout(worker_cls, tiny_model_dir, layout, lambda c: c.execute_rank0(method, batch)[key])
                   for layout in LAYOUTS}
        plain = results["plain"]
        if key == "logprobs":
            results_actor = plain
        assert plain.shape == mask.shape
        assert (plain[:, 0] == 0).all() and (plain[mask == 0] == 0).all()
        assert (plain[:, 1:][mask[:, 1:] == 1] != 0).all()
        for layout, values in results.items():
            assert torch.allclose(values, plain, atol=1e-5), (layout, (values - plain).abs().max())
    # and they are each sample's log-probs from a forward pass over that sample alone (no padding)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    for i, n in enumerate(mask.sum(1).tolist()):
        with torch.no_grad():
            logits = model(input_ids=batch.tensors["input_ids"][i : i + 1, :n]).logits
        alone = torch.log_softmax(logits[0, :-1], -1).gather(1, batch.tensors["input_ids"][i, 1:n, None])[:, 0]
        assert torch.allclose(results_actor[i, 1:n], alone, atol=1e-5)


def test_response_only_log_probs_equal_the_full_ones_on_the_response_in_every_layout(tiny_model_dir):
    batch = make_batch()
    response = batch.tensors["response_mask"]
    response[:, :4] = 0  # a longer prompt than make_batch's 2 tokens
    full = run_layout(ActorWorker, tiny_model_dir, "plain", lambda c: c.execute_rank0("compute_log_probs", batch)["logprobs"])
    for layout in LAYOUTS:
        only = run_layout(ActorWorker, tiny_model_dir, layout,
                          lambda c: c.execute_rank0("compute_log_probs", batch, response_only=True)["logprobs"])
        assert torch.allclose(only, full * response, atol=1e-5), (layout, (only - full * response).abs().max())
        assert (only[response == 1] != 0).all() and (only[response == 0] == 0).all(), layout
    no_mask = batch.select(["input_ids", "attention_mask", "position_ids"])
    with pytest.raises(ValueError, match="response_only=True.*needs the batch's response_mask"):
        run_layout(ActorWorker, tiny_model_dir, "plain", lambda c: c.execute_rank0("compute_log_probs", no_mask, response_only=True))


@pytest.mark.parametrize("agg_mode", ["seq-mean-token-mean", "token-mean"])
def test_actor_update_is_the_same_for_every_layout(tiny_model_dir, agg_mode):
    batch = make_batch()
    cfg = LossConfig(mini_batch_size=8, use_kl_loss=True, kl_loss_coef=0.5, entropy_loss_coef=0.01,
                     loss_agg_mode=agg_mode, max_grad_norm=None, shuffle=False)

    def train(cluster):
        before = cluster.execute_rank0("get_state_dict")
        metrics = cluster.execute_rank0("train_step", batch, cfg)
        return before, metrics, cluster.execute_rank0("get_state_dict")

    results = {layout: run_layout(ActorWorker, tiny_model_dir, layout, train) for layout in LAYOUTS}
    before, plain_metrics, plain_after = results["plain"]
    assert max_abs_diff(before, plain_after) > 1e-3  # the step moved the weights (100× the tolerance)
    for layout, (_, metrics, after) in results.items():
        assert max_abs_diff(after, plain_after) < 1e-5, layout
        for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy", "actor/grad_norm", "actor/clipfrac"):
            assert metrics[key] == pytest.approx(plain_metrics[key], rel=1e-5, abs=1e-6), (layout, key)


def test_critic_update_is_the_same_for_every_layout(tiny_model_dir):
    batch = make_batch()
    cfg = LossConfig(mini_batch_size=8, value_clip=0.2, max_grad_norm=None, shuffle=False)

    def train(cluster):
        metrics = cluster.execute_rank0("train_step", batch, cfg)
        return metrics, cluster.execute_rank0("get_state_dict")

    results = {layout: run_layout(CriticWorker, tiny_model_dir, layout, train) for layout in ("plain", "dynamic", "packing")}
    plain_metrics, plain_after = results["plain"]
    assert "score.weight" in plain_after
    for layout, (metrics, after) in results.items():
        assert max_abs_diff(after, plain_after) < 1e-5, layout
        assert metrics["critic/vf_loss"] == pytest.approx(plain_metrics["critic/vf_loss"], rel=1e-5)
        assert metrics["critic/grad_norm"] == pytest.approx(plain_metrics["critic/grad_norm"], rel=1e-5)
