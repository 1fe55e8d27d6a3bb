"""save → load → one more step gives bit-identical weights to a run that was never interrupted."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.configs.worker_config import TrainingArgs
from roll.distributed import Cluster
from roll.pipeline.agentic.checkpoints import latest_checkpoint
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from roll.workers.critic_worker import CriticWorker
from tests.workers.helpers import actor_config, make_batch


def config_for(model_dir):
    # Adam defaults (tiny epsilon) and a decaying schedule with warmup: optimizer moments and the
    # scheduler position must both be restored for the next step to match bit for bit.
    config = actor_config(model_dir)
    return dataclasses.replace(config, training_args=TrainingArgs(
        learning_rate=1e-3, per_device_train_batch_size=2, gradient_accumulation_steps=2, warmup_steps=1,
        lr_scheduler_type="cosine"))


@pytest.mark.parametrize("worker_cls", [ActorWorker, CriticWorker])
def test_resume_is_bit_identical(tiny_model_dir, tmp_path, worker_cls):
    batches = [make_batch(seed=s) for s in range(3)]
    cfg = LossConfig(ppo_epochs=2, use_kl_loss=True, kl_loss_coef=0.1, entropy_loss_coef=0.01, value_clip=0.2)
    kwargs = dict(executor="local", seed=7, num_training_steps=20)

    def make():
        return Cluster("ckpt", worker_cls, config_for(tiny_model_dir), **kwargs)

    straight = make()
    for b in batches:
        straight.execute_rank0("train_step", b, cfg)
    expected = straight.execute_rank0("get_state_dict")
    straight.shutdown()

    first = make()
    for b in batches[:2]:
        first.execute_rank0("train_step", b, cfg)
    first.execute_all("save_checkpoint", tmp_path / "checkpoint-2" / "actor_train")
    first.shutdown()
    # Global RNG drawn after the save (e.g. by other code in the process) must not leak into the resumed run.
    torch.rand(1000)

    resumed = make()
    resumed.execute_all("load_checkpoint", tmp_path / "checkpoint-2" / "actor_train")
    resumed.execute_rank0("train_step", batches[2], cfg)
    got = resumed.execute_rank0("get_state_dict")
    resumed.shutdown()

    assert got.keys() == expected.keys()
    for key in expected:
        assert torch.equal(got[key], expected[key]), key


def test_resume_applies_a_changed_learning_rate_at_the_saved_schedule_point(tiny_model_dir, tmp_path):
    """A `learning_rate=` override on a resumed run takes effect; the warm-up/decay position stays the checkpoint's."""
    batches = [make_batch(seed=s) for s in range(3)]
    cfg = LossConfig(mini_batch_size=8)
    kwargs = dict(executor="local", seed=7, num_training_steps=20)

    straight = Cluster("lr", ActorWorker, config_for(tiny_model_dir), **kwargs)
    lrs = [straight.execute_rank0("train_step", b, cfg)["actor/lr"] for b in batches[:2]]
    straight.execute_all("save_checkpoint", tmp_path / "checkpoint-2" / "actor_train")
    lrs.append(straight.execute_rank0("train_step", batches[2], cfg)["actor/lr"])
    straight.shutdown()

    lowered = config_for(tiny_model_dir)
    lowered = dataclasses.replace(lowered, training_args=dataclasses.replace(lowered.training_args, learning_rate=1e-4))
    resumed = Cluster("lr2", ActorWorker, lowered, **kwargs)
    resumed.execute_all("load_checkpoint", tmp_path / "checkpoint-2" / "actor_train")
    got = resumed.execute_rank0("train_step", batches[2], cfg)["actor/lr"]
    resumed.shutdown()
    # The straight run went on to its 4th optimizer step at 1e-3; the resumed one is at the same point at 1e-4.
    assert lrs[2] < lrs[1] < 1e-3
    assert got == pytest.approx(lrs[2] * 0.1, rel=1e-6)


def test_checkpoint_is_a_hugging_face_folder(tiny_model_dir, tmp_path):
    cluster = Cluster("hf", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        cluster.execute_rank0("train_step", make_batch(), LossConfig(mini_batch_size=8))
        state = cluster.execute_rank0("get_state_dict")
        cluster.execute_all("save_checkpoint", tmp_path / "step1")
    finally:
        cluster.shutdown()
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "step1").state_dict()
    assert all(torch.equal(reloaded[k], state[k]) for k in state)
    assert (tmp_path / "step1" / "tokenizer_config.json").exists()
    assert (tmp_path / "step1" / "optimizer.pt").exists()


def test_missing_checkpoint_and_scheduler_errors(tiny_model_dir, tmp_path):
    cluster = Cluster("err", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        with pytest.raises(FileNotFoundError, match="worker_state_rank0.pt"):
            cluster.execute_all("load_checkpoint", tmp_path / "nothing")
    finally:
        cluster.shutdown()
    config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(lr_scheduler_type="linear"))
    with pytest.raises(ValueError, match="num_training_steps"):
        Cluster("sched", ActorWorker, config, executor="local")
    assert latest_checkpoint(tmp_path) is None


def test_resuming_a_checkpoint_without_a_worker_folder_this_run_loads_fails_before_any_worker_starts(tmp_path):
    """A PPO run with a warm-up saves actor_train/, critic/ and reference/: a checkpoint missing one of
    them (saved by a GRPO run, or before the reference was kept) is refused in the pipeline's
    constructor, before the clusters, naming the folder and what to do."""
    from roll.launch.loader import load_agentic_config
    from roll.pipeline.agentic.agentic_pipeline import AgenticPipeline
    from roll.pipeline.agentic.checkpoints import STATE_FILE
    from tests.conftest import REPO_ROOT

    saved = tmp_path / "checkpoint-3"
    (saved / "actor_train").mkdir(parents=True)
    (saved / STATE_FILE).write_bytes(b"")
    config = load_agentic_config(REPO_ROOT / "examples" / "smollm2-135M-agentic_cpu", "agent_ppo_frozen_lake",
                                 overrides=["pretrain=tiny-random-qwen2", f"resume_from_checkpoint={saved}",
                                            f"output_dir={tmp_path / 'out'}"])
    assert config.uses_critic and config.uses_reference and config.sft_warmup.steps > 0
    with pytest.raises(FileNotFoundError, match=r"has no critic/ folder.*a critic is saved only by runs that use one"):
        AgenticPipeline(config)
    (saved / "critic").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no reference/ folder.*sft_warmup\.steps=0"):
        AgenticPipeline(config)
