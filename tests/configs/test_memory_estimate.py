"""The memory estimate made before any worker starts: its parts agree with the real model and the real
decode engine's cache, and a config that cannot fit this machine is refused naming the keys to change."""

from __future__ import annotations

import ray
import torch
from transformers import AutoModelForCausalLM

from roll.configs.memory_estimate import GIB, infer_estimate, machine_memory_bytes, model_facts
from roll.pipeline.agentic.agentic_config import AgenticConfig, EnvManagerConfig
from roll.strategies.kv_forward import LeanForward

from tests.configs.test_machine_checks import launch


def test_the_estimate_counts_the_real_weights_and_the_engines_largest_kv_cache(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    facts = model_facts(str(tiny_model_dir))
    assert facts.params == sum(p.numel() for p in model.parameters())

    config = AgenticConfig(sequence_length=700, train_env_manager=EnvManagerConfig(num_env_groups=5, group_size=4),
                           val_env_manager=EnvManagerConfig(num_env_groups=8, group_size=1))
    config.actor_infer.model_args.model_name_or_path = str(tiny_model_dir)
    estimate = infer_estimate(config, facts)
    assert estimate.parts["weights"] == 4 * facts.params
    # the engine's cache once 20 sessions of 700 tokens are in it (it grows by doubling)
    cache = LeanForward(model).new_cache()
    cache.ensure(slots=20, capacity=700)
    cache_bytes = sum(t.numel() * t.element_size() for t in cache.k + cache.v)
    assert estimate.parts["kv_cache"] == cache_bytes


def test_a_config_that_cannot_fit_memory_is_refused_before_any_worker_starts(tiny_model_dir, capsys):
    rc = launch(tiny_model_dir, "actor_train.max_tokens_per_microbatch_in_train=100000000")
    err = capsys.readouterr().err
    assert rc == 2 and not ray.is_initialized()
    assert f"this machine has {machine_memory_bytes() / GIB:.1f} GiB of memory" in err
    assert "actor_train" in err and "activations" in err and "logits" in err
    assert "to lower it change actor_train.max_tokens_per_microbatch_in_train" in err
