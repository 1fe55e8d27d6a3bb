"""The memory estimate made before any worker starts: its parts agree with the real model and the real
decode engine's cache, and a config that cannot fit this machine is refused naming the keys to change."""

from __future__ import annotations

import pytest
import ray
import torch
from transformers import AutoModelForCausalLM

from roll.launch.memory_estimate import GIB, ModelFacts, infer_estimate, machine_memory_bytes, model_facts, trainer_estimate
from roll.configs.agentic_config import AgenticConfig, EnvManagerConfig
from roll.strategies.hf_infer import HFInferStrategy

from tests.configs.test_machine_checks import launch

# the refusals assert that Ray was never started, which only means something with Ray down
pytestmark = pytest.mark.usefixtures("no_ray")


def test_the_estimate_counts_the_real_weights_and_the_engines_fixed_kv_budget(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    facts = model_facts(str(tiny_model_dir))
    assert facts.params == sum(p.numel() for p in model.parameters())

    config = AgenticConfig(sequence_length=700, train_env_manager=EnvManagerConfig(num_env_groups=5, group_size=4),
                           val_env_manager=EnvManagerConfig(num_env_groups=8, group_size=1))
    config.actor_infer.model_args.model_name_or_path = str(tiny_model_dir)
    estimate = infer_estimate(config, facts)
    assert estimate.parts["weights"] == 4 * facts.params
    # by default one slot per env (20) of sequence_length tokens: the real engine's cache, which never grows
    strategy = HFInferStrategy(tiny_model_dir, max_sessions=20, max_model_len=700)
    try:
        assert estimate.parts["kv_cache"] == strategy.engine.cache.nbytes()
        assert estimate.parts["step_logits"] == 2 * 20 * facts.vocab * 4
    finally:
        strategy.shutdown()
    # the config's keys change the budget, and the estimate follows
    config.actor_infer.strategy_args.strategy_config = {"max_num_seqs": 6, "max_model_len": 900}
    smaller = infer_estimate(config, facts)
    strategy = HFInferStrategy(tiny_model_dir, max_sessions=20, max_model_len=700,
                               strategy_config=config.actor_infer.strategy_args.strategy_config)
    try:
        assert smaller.parts["kv_cache"] == strategy.engine.cache.nbytes() == estimate.parts["kv_cache"] * 6 * 900 / (20 * 700)
    finally:
        strategy.shutdown()
    assert any("strategy_config.max_num_seqs" in key for key in smaller.keys)


def test_a_config_that_cannot_fit_memory_is_refused_before_any_worker_starts(tiny_model_dir, capsys):
    rc = launch(tiny_model_dir, "actor_train.max_tokens_per_microbatch_in_train=100000000")
    err = capsys.readouterr().err
    assert rc == 2 and not ray.is_initialized()
    assert f"this machine has {machine_memory_bytes() / GIB:.1f} GiB of memory" in err
    assert "actor_train" in err and "activations" in err and "logits" in err
    assert "to lower it change actor_train.max_tokens_per_microbatch_in_train" in err


def test_a_bad_engine_budget_is_refused_before_any_worker_starts(tiny_model_dir, capsys):
    rc = launch(tiny_model_dir, "+actor_infer.strategy_args.strategy_config.max_model_len=100")
    err = capsys.readouterr().err
    assert rc == 2 and not ray.is_initialized()
    assert "strategy_config.max_model_len=100 is below sequence_length" in err
    rc = launch(tiny_model_dir, "+actor_infer.strategy_args.strategy_config.block_size=16")
    err = capsys.readouterr().err
    assert rc == 2 and "['block_size'] are not hf_infer settings" in err


def test_the_trainers_logits_are_one_chunk_where_the_output_layer_is_chunked():
    # SmolLM2-135M's shapes; 4 × 1024 tokens per micro-batch
    facts = ModelFacts(params=134_515_008, layers=30, hidden=576, intermediate=1536, vocab=49152, kv_heads=3,
                       head_dim=64, model_type="llama")
    config = AgenticConfig(sequence_length=1024)
    config.actor_train.training_args.per_device_train_batch_size = 4
    config.actor_train.strategy_args.strategy_name = "hf_train"
    chunked = trainer_estimate("actor_train", config.actor_train, facts, 1024).parts["logits"]
    assert chunked == 2 * (1 << 24) * 4  # two float32 chunks of 16M logits: 128 MiB
    config.actor_train.strategy_args.strategy_name = "fsdp2_train"  # chunks inside the model's forward
    assert trainer_estimate("actor_train", config.actor_train, facts, 1024).parts["logits"] == chunked
    config.actor_train.strategy_args.strategy_name = "deepspeed_train"  # keeps full logits and their gradient
    full = trainer_estimate("actor_train", config.actor_train, facts, 1024).parts["logits"]
    assert full == 2 * 4 * 1024 * 49152 * 4


def test_trainers_keep_fp32_master_weights_under_bf16():
    facts = ModelFacts(params=494_032_768, layers=24, hidden=896, intermediate=4864, vocab=151936, kv_heads=2,
                       head_dim=64, model_type="qwen2")  # Qwen2.5-0.5B
    config = AgenticConfig(sequence_length=1024)
    worker = config.actor_train
    worker.strategy_args.strategy_name, worker.model_args.dtype = "hf_train", "fp32"
    fp32 = trainer_estimate("actor_train", worker, facts, 1024).parts
    worker.model_args.dtype = "bf16"
    bf16 = trainer_estimate("actor_train", worker, facts, 1024).parts
    for part in ("weights", "grads", "adamw"):
        assert bf16[part] == fp32[part] == (2 if part == "adamw" else 1) * 4 * facts.params
    assert fp32["compute_weights"] == 0 and bf16["compute_weights"] == 2 * facts.params  # autocast's bf16 copies
    assert bf16["activations"] == fp32["activations"] / 2
