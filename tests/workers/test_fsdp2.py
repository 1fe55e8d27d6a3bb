"""Two fsdp2_train ranks (gloo, real Ray actors) make the same update as one hf_train worker."""

from __future__ import annotations

import pytest
import torch

from roll.distributed import Cluster
from roll.launch.loader import load_agentic_config
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, make_batch, max_abs_diff


def test_two_fsdp2_ranks_match_one_hf_train_worker(tiny_model_dir, ray_session, tmp_path):
    batch = make_batch()
    # One optimizer step over the whole batch: the single worker sees 8 samples, each rank 4.
    single_cfg = LossConfig(mini_batch_size=8, use_kl_loss=True, kl_loss_coef=0.3, max_grad_norm=0.5, shuffle=False)
    rank_cfg = LossConfig(**{**single_cfg.__dict__, "mini_batch_size": 4})

    single = Cluster("single", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        before = single.execute_rank0("get_state_dict")
        single_logprobs = single.execute_rank0("compute_log_probs", batch)["logprobs"]
        single_metrics = single.execute_rank0("train_step", batch, single_cfg)
        single_after = single.execute_rank0("get_state_dict")
    finally:
        single.shutdown()

    fsdp = Cluster("fsdp", ActorWorker, actor_config(tiny_model_dir, "fsdp2_train"), num_workers=2, threads_per_worker=1)
    try:
        logprobs = fsdp.dispatch_batch("compute_log_probs", batch)["logprobs"]
        metrics = fsdp.dispatch_batch("train_step", batch, loss_cfg=rank_cfg)
        # get_state_dict is collective: execute_rank0 runs it on both ranks, rank 0 answers
        after = fsdp.execute_rank0("get_state_dict")
        # a sharded model is gathered whole, so its weight syncs are one piece, never streamed buckets
        in_parts = fsdp.execute_rank0("inference_weight_bytes")
        fsdp.execute_all("save_checkpoint", tmp_path / "ckpt")
    finally:
        fsdp.shutdown()

    assert (logprobs - single_logprobs).abs().max() < 1e-5
    assert max_abs_diff(before, single_after) > 1e-3
    assert max_abs_diff(after, single_after) < 1e-5
    assert in_parts is None
    assert metrics[0] == metrics[1]  # metrics are reduced over ranks
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/clipfrac"):
        assert metrics[0][key] == pytest.approx(single_metrics[key], rel=1e-5, abs=1e-6), key
    # the sharded checkpoint is an ordinary HF folder holding the full weights
    assert (tmp_path / "ckpt" / "model.safetensors").exists()
    assert {p.name for p in (tmp_path / "ckpt").glob("worker_state_rank*.pt")} == {"worker_state_rank0.pt", "worker_state_rank1.pt"}


def test_uneven_ranks_stay_in_step(tiny_model_dir, ray_session):
    """7 samples over 2 ranks with dynamic batching: ranks differ in samples and micro-batches, yet the
    collectives line up (no hang) and both ranks report the same reduced metrics."""
    config = actor_config(tiny_model_dir, "fsdp2_train", use_dynamic_batching_in_train=True,
                          max_tokens_per_microbatch_in_train=64, sequence_length_round_in_train=8)
    batch = make_batch([40, 3, 5, 4, 38, 36, 2])
    cluster = Cluster("uneven", ActorWorker, config, num_workers=2, threads_per_worker=1)
    try:
        metrics = cluster.dispatch_batch("train_step", batch, loss_cfg=LossConfig(mini_batch_size=2, ppo_epochs=2))
    finally:
        cluster.shutdown()
    assert metrics[0] == metrics[1] and metrics[0]["actor/grad_norm"] > 0


def test_fsdp2_checkpoint_resumes_on_fsdp2_and_on_hf_train(tiny_model_dir, ray_session, tmp_path):
    """A sharded run's checkpoint holds full weights and optimizer state: two ranks resume it, and so
    does one hf_train worker; both then make the same next update."""
    batch, cfg = make_batch(), LossConfig(mini_batch_size=4, shuffle=False)
    fsdp = Cluster("fsdp_save", ActorWorker, actor_config(tiny_model_dir, "fsdp2_train"), num_workers=2, threads_per_worker=1)
    try:
        fsdp.dispatch_batch("train_step", batch, loss_cfg=cfg)
        saved = fsdp.execute_rank0("get_state_dict")
        fsdp.execute_all("save_checkpoint", tmp_path / "ckpt")
    finally:
        fsdp.shutdown()
    fsdp = Cluster("fsdp_load", ActorWorker, actor_config(tiny_model_dir, "fsdp2_train"), num_workers=2, threads_per_worker=1)
    try:
        fsdp.execute_all("load_checkpoint", tmp_path / "ckpt")
        assert max_abs_diff(fsdp.execute_rank0("get_state_dict"), saved) == 0
        fsdp.dispatch_batch("train_step", batch, loss_cfg=cfg)
        sharded_next = fsdp.execute_rank0("get_state_dict")
    finally:
        fsdp.shutdown()
    single = Cluster("hf_load", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        # worker_state_rank0.pt (RNG, step counter) is rank 0's; hf_train reads the same full files
        single.execute_all("load_checkpoint", tmp_path / "ckpt")
        single.execute_rank0("train_step", batch, LossConfig(mini_batch_size=8, shuffle=False))
        single_next = single.execute_rank0("get_state_dict")
    finally:
        single.shutdown()
    assert max_abs_diff(saved, sharded_next) > 1e-3
    assert max_abs_diff(single_next, sharded_next) < 1e-5


def test_fsdp2_trains_the_cpu_examples_actor_with_the_chunked_output_layer(tiny_model_dir):
    """The CPU example's actor_train settings (its micro-batching, dtype, optimizer) with fsdp2_train:
    the output layer runs chunk by chunk, and one PPO step moves the weights with a finite loss."""
    config = load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                                 overrides=[f"pretrain={tiny_model_dir}", "actor_train.strategy_args.strategy_name=fsdp2_train"])
    worker = ActorWorker(config.actor_train)
    try:
        batch = make_batch(vocab=len(worker.tokenizer))
        mb = worker.plan_micro_batches(batch, train=True)[0][0]
        with torch.no_grad():
            assert worker.strategy.forward_token_logprobs(mb, True) is not None  # no [tokens, vocab] logits
        before = worker.get_state_dict()
        metrics = worker.train_step(batch, LossConfig(mini_batch_size=len(batch), shuffle=False))
        after = worker.get_state_dict()
    finally:
        worker.shutdown()
    assert torch.isfinite(torch.tensor(metrics["actor/pg_loss"])) and metrics["actor/grad_norm"] > 0
    # get_state_dict returns copies: with one rank on the CPU it once returned the live weights themselves
    assert max_abs_diff(before, after) > 0
