"""Strategy choices: availability errors, LoRA, gradient checkpointing, bf16, and clear refusals."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from roll.configs.worker_config import ModelArgs
from roll.distributed import Cluster
from roll.strategies import check_strategy_available
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, make_batch, max_abs_diff


def test_strategy_availability_messages():
    check_strategy_available("hf_train")
    check_strategy_available("fsdp2_train")
    with pytest.raises(ValueError, match="fsdp2_train"):
        check_strategy_available("megatron_train")
    with pytest.raises(ValueError, match="unknown training strategy"):
        check_strategy_available("fsdp_train", "train")
    if importlib.util.find_spec("deepspeed") is None:
        with pytest.raises(ValueError, match="DeepSpeed.*fsdp2_train"):
            check_strategy_available("deepspeed_train")


def train_once(config, batch, cfg=None):
    cluster = Cluster("t", ActorWorker, config, executor="local")
    try:
        before = cluster.execute_rank0("get_state_dict")
        metrics = cluster.execute_rank0("train_step", batch, cfg or LossConfig(mini_batch_size=8, shuffle=False))
        return before, metrics, cluster.execute_rank0("get_state_dict"), cluster
    finally:
        cluster.shutdown()


def test_gradient_checkpointing_gives_the_same_update(tiny_model_dir):
    batch = make_batch()
    _, _, plain, _ = train_once(actor_config(tiny_model_dir), batch)
    config = actor_config(tiny_model_dir)
    config.model_args = ModelArgs(model_name_or_path=str(tiny_model_dir), disable_gradient_checkpointing=False)
    _, _, checkpointed, cluster = train_once(config, batch)
    assert cluster.hosts == []  # shut down
    assert max_abs_diff(plain, checkpointed) < 1e-6


def test_lora_trains_adapters_and_syncs_merged_weights(tiny_model_dir):
    config = actor_config(tiny_model_dir)
    config.model_args = ModelArgs(model_name_or_path=str(tiny_model_dir), lora_rank=4, lora_alpha=8,
                                  lora_target="q_proj,v_proj")
    before, metrics, after, _ = train_once(config, make_batch())
    # weight sync gets plain HF names (adapters merged in), loadable into the inference model
    full, _, _, _ = train_once(actor_config(tiny_model_dir), make_batch())
    assert after.keys() == full.keys()
    changed = {k for k in after if not torch.equal(after[k], before[k])}
    assert changed and all("q_proj" in k or "v_proj" in k for k in changed)
    assert metrics["actor/grad_norm"] > 0


def test_bf16_log_probs_are_close_to_fp32(tiny_model_dir):
    batch = make_batch()
    results = {}
    for dtype in ("fp32", "bf16"):
        config = actor_config(tiny_model_dir)
        config.model_args = ModelArgs(model_name_or_path=str(tiny_model_dir), dtype=dtype)
        cluster = Cluster(dtype, ActorWorker, config, executor="local")
        results[dtype] = cluster.execute_rank0("compute_log_probs", batch)["logprobs"]
        cluster.shutdown()
    diff = (results["bf16"] - results["fp32"]).abs().max()
    assert 0 < diff < 0.1


def test_refusals_are_clear(tiny_model_dir, ray_session):
    with pytest.raises(ValueError, match="executor='ray'"):
        Cluster("x", ActorWorker, actor_config(tiny_model_dir, "fsdp2_train"), num_workers=2, executor="local")
    with pytest.raises(ValueError, match="executor must be one of"):
        Cluster("x", ActorWorker, actor_config(tiny_model_dir), executor="threads")
    cluster = Cluster("ref", ActorWorker, actor_config(tiny_model_dir), num_workers=2, threads_per_worker=1)
    try:
        # hf_train may score on several ranks (a reference role) but trains in one process only
        logprobs = cluster.dispatch_batch("compute_log_probs", make_batch())["logprobs"]
        assert logprobs.shape == make_batch().tensors["input_ids"].shape
        with pytest.raises(Exception, match="fsdp2_train"):
            cluster.dispatch_batch("train_step", make_batch(), loss_cfg=LossConfig())
        with pytest.raises(ValueError, match="cannot feed 2 ranks"):
            cluster.dispatch_batch("compute_log_probs", make_batch([5]))
        with pytest.raises(AttributeError, match="no method"):
            cluster.execute_all("compute_logprobs")
    finally:
        cluster.shutdown()
    with pytest.raises(ValueError, match="dual_clip"):
        train_once(actor_config(tiny_model_dir), make_batch(), LossConfig(dual_clip=0.5))
    config = dataclasses.replace(actor_config(tiny_model_dir), model_args=ModelArgs())
    with pytest.raises(ValueError, match="model_name_or_path"):
        Cluster("nomodel", ActorWorker, config, executor="local")
