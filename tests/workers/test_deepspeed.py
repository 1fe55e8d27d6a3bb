"""deepspeed_train on this CPU: ZeRO stages 0-3 make hf_train's update, checkpoints resume exactly.

DeepSpeed compiles one C++ op the first time a process group starts (cached per machine, see
docs/training.md), so the first test here may take a few minutes on a fresh machine.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from roll.configs.worker_config import ModelArgs, StrategyArgs, TrainingArgs
from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, make_batch, max_abs_diff

pytest.importorskip("deepspeed", reason="DeepSpeed is an extra: pip install 'roll[deepspeed]' (scripts/bootstrap.sh installs it)")

from roll.strategies.deepspeed_train import roll_deepspeed_config  # noqa: E402

# One optimizer step over 8 samples in 4 micro-batches, with clipping active (the norm is ~1-3).
STEP = LossConfig(mini_batch_size=8, use_kl_loss=True, kl_loss_coef=0.3, max_grad_norm=0.5, shuffle=False)


def ds_config(model_dir, stage: int, extra: dict | None = None, **overrides):
    zero = {"stage": stage, **(extra or {})}
    strategy = StrategyArgs(strategy_name="deepspeed_train", strategy_config={"zero_optimization": zero})
    return dataclasses.replace(actor_config(model_dir, **overrides), strategy_args=strategy)


@pytest.fixture(scope="module")
def hf_reference(tiny_model_dir):
    """hf_train's log-probs, metrics and weights after one step of STEP on make_batch()."""
    batch = make_batch()
    cluster = Cluster("hf", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        logprobs = cluster.execute_rank0("compute_log_probs", batch)["logprobs"]
        metrics = cluster.execute_rank0("train_step", batch, STEP)
        return logprobs, metrics, cluster.execute_rank0("get_state_dict")
    finally:
        cluster.shutdown()


def test_config_takes_roll_settings_and_refuses_conflicts():
    targs, margs = TrainingArgs(per_device_train_batch_size=2, gradient_accumulation_steps=4), ModelArgs(dtype="bf16")
    guide_style = {
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto", "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto", "loss_scale": 0},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "reduce_bucket_size": "auto"},
    }
    config = roll_deepspeed_config(guide_style, targs, margs, world_size=2)
    assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"], config["train_batch_size"]) == (2, 4, 16)
    assert config["bf16"] == {"enabled": True} and config["fp16"] == {"enabled": False, "loss_scale": 0}
    assert config["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
    assert config["managed_gradient_accumulation"] is False and config["gradient_clipping"] == 0.0
    assert roll_deepspeed_config(None, targs, ModelArgs(), 1)["zero_optimization"] == {"stage": 2}
    for bad, match in [({"train_micro_batch_size_per_gpu": 4}, "per_device_train_batch_size=2"),
                       ({"gradient_clipping": 1.0}, "max_grad_norm"),
                       ({"bf16": {"enabled": True}}, "model_args.dtype is 'fp32'"),
                       ({"optimizer": {"type": "AdamW"}}, "training_args"),
                       ({"zero_optimization": {"stage": 4}}, "0, 1, 2 or 3")]:
        with pytest.raises(ValueError, match=match):
            roll_deepspeed_config(bad, targs, ModelArgs(), 1)


def train_save_resume(config, tmp_path, num_workers: int, fresh: bool = True) -> dict:
    """One step (checked against hf_train), a checkpoint, a second step; then the checkpoint is loaded
    (into a fresh cluster, or with fresh=False back into the same engines, whose weights and optimizer
    state have moved on since) and the second step is made again."""
    batch = make_batch()
    step = STEP if num_workers == 1 else dataclasses.replace(STEP, mini_batch_size=8 // num_workers)
    executor = "local" if num_workers == 1 else "ray"

    def start(name):
        return Cluster(name, ActorWorker, config, num_workers=num_workers, executor=executor, threads_per_worker=1)

    out = {}
    cluster = start("ds_run")
    try:
        out["before"] = cluster.execute_rank0("get_state_dict")
        out["logprobs"] = cluster.dispatch_batch("compute_log_probs", batch)["logprobs"]
        out["metrics"] = cluster.dispatch_batch("train_step", batch, loss_cfg=step)
        out["after"] = cluster.execute_rank0("get_state_dict")
        cluster.execute_all("save_checkpoint", tmp_path / "ckpt")
        cluster.dispatch_batch("train_step", batch, loss_cfg=step)
        out["continued"] = cluster.execute_rank0("get_state_dict")
    finally:
        if fresh:
            cluster.shutdown()
    if fresh:
        cluster = start("ds_resume")
    try:
        cluster.execute_all("load_checkpoint", tmp_path / "ckpt")
        out["loaded"] = cluster.execute_rank0("get_state_dict")
        cluster.dispatch_batch("train_step", batch, loss_cfg=step)
        out["resumed"] = cluster.execute_rank0("get_state_dict")
    finally:
        cluster.shutdown()
    return out


def check_run(out: dict, hf_reference, checkpoint) -> None:
    from transformers import AutoModelForCausalLM

    hf_logprobs, hf_metrics, hf_after = hf_reference
    assert (out["logprobs"] - hf_logprobs).abs().max() < 1e-5
    assert max_abs_diff(out["before"], out["after"]) > 1e-3
    assert max_abs_diff(out["after"], hf_after) < 1e-5
    metrics = out["metrics"] if isinstance(out["metrics"], dict) else out["metrics"][0]
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/lr"):
        assert metrics[key] == pytest.approx(hf_metrics[key], rel=1e-5, abs=1e-6), key
    # resume is exact: the same weights, then the same next step bit for bit
    assert max_abs_diff(out["loaded"], out["after"]) == 0
    assert max_abs_diff(out["continued"], out["after"]) > 1e-3
    assert max_abs_diff(out["resumed"], out["continued"]) == 0
    # the actor weights are an ordinary Hugging Face folder
    reloaded = AutoModelForCausalLM.from_pretrained(checkpoint).state_dict()
    assert max_abs_diff({k: reloaded[k] for k in out["after"]}, out["after"]) == 0


OFFLOAD = {"offload_optimizer": {"device": "cpu"}}


@pytest.mark.parametrize("stage,extra", [(0, None), (1, None), (2, None), (3, None), (2, OFFLOAD),
                                         (3, {**OFFLOAD, "offload_param": {"device": "cpu"}})])
def test_one_rank_matches_hf_train_and_resumes_exactly(stage, extra, tiny_model_dir, hf_reference, tmp_path):
    out = train_save_resume(ds_config(tiny_model_dir, stage, extra), tmp_path, num_workers=1)
    check_run(out, hf_reference, tmp_path / "ckpt")


# Two Ray ranks cost about a minute per cluster here. Every stage runs: stages 0-2 reload their checkpoint
# into the same engines (one cluster each); ZeRO-3, whose weights are partitioned and gathered for the
# sync and the checkpoint, reloads into a fresh cluster of new processes.
@pytest.mark.parametrize("stage,fresh", [(0, False), (1, False), (2, False), (3, True)])
def test_two_ranks_match_hf_train_and_resume_exactly(stage, fresh, tiny_model_dir, hf_reference, tmp_path, ray_session):
    out = train_save_resume(ds_config(tiny_model_dir, stage), tmp_path, num_workers=2, fresh=fresh)
    check_run(out, hf_reference, tmp_path / "ckpt")
    assert out["metrics"][0] == out["metrics"][1]  # metrics are reduced over ranks
    shards = {p.name for p in (tmp_path / "ckpt" / "deepspeed" / "state").iterdir()}
    assert stage == 0 or {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)} <= shards, shards


def test_resume_with_a_changed_learning_rate_trains_at_it(tiny_model_dir, tmp_path):
    """DeepSpeed restores its scheduler too; a learning_rate changed for the resume must still win."""
    config = ds_config(tiny_model_dir, 2)
    batch = make_batch()
    cluster = Cluster("ds_lr", ActorWorker, config, executor="local")
    try:
        saved_lr = cluster.execute_rank0("train_step", batch, STEP)["actor/lr"]
        cluster.execute_all("save_checkpoint", tmp_path / "ckpt")
    finally:
        cluster.shutdown()
    lowered = dataclasses.replace(config, training_args=dataclasses.replace(
        config.training_args, learning_rate=config.training_args.learning_rate / 10))
    cluster = Cluster("ds_lr_resumed", ActorWorker, lowered, executor="local")
    try:
        cluster.execute_all("load_checkpoint", tmp_path / "ckpt")
        resumed_lr = cluster.execute_rank0("train_step", batch, STEP)["actor/lr"]
    finally:
        cluster.shutdown()
    assert saved_lr == pytest.approx(config.training_args.learning_rate)
    assert resumed_lr == pytest.approx(saved_lr / 10, rel=1e-6)
