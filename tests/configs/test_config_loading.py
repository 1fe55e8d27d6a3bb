"""The guide's, the CPU and ROLL's own configs load; overrides change what they name."""

import logging

import pytest

from roll.launch.loader import load_agentic_config
from tests.conftest import REPO_ROOT, ROLL_EXAMPLES, requires_roll_examples

GUIDE = ("examples/qwen2.5-0.5B-agentic_ds", "agent_val_frozen_lake")
CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
ROLL_DIR = ROLL_EXAMPLES / "qwen2.5-0.5B-agentic" if ROLL_EXAMPLES else None


def test_guide_config_loads_as_the_guide_describes():
    config = load_agentic_config(*GUIDE)
    assert config.pretrain == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config.actor_infer.strategy_args.strategy_name == "vllm"
    assert config.actor_train.device_mapping == list(range(8))
    assert config.adv_estimator == "grpo"
    assert config.custom_envs["FrozenLake"].env_type == "frozen_lake"
    # interpolated from examples/config/envs.yaml through the defaults list
    assert config.custom_envs["FrozenLake"].env_config["is_slippery"] is False
    assert config.val_env_manager.num_groups_partition == [512, 512]


def test_config_path_may_be_relative_to_examples():
    config = load_agentic_config("qwen2.5-0.5B-agentic_ds", "agent_val_frozen_lake.yaml")
    assert config.exp_name == "agentic_pipeline"


def test_cpu_config_loads_with_cpu_strategies():
    config = load_agentic_config(*CPU)
    assert config.actor_train.strategy_args.strategy_name == "hf_train"
    assert config.actor_infer.strategy_args.strategy_name == "hf_infer"
    assert config.rollout_batch_size % config.train_env_manager.group_size == 0
    # every role's model defaults to pretrain
    assert config.actor_train.model_args.model_name_or_path == "SmolLM2-135M-Instruct"
    # env managers without generating_args take actor_infer's
    assert config.train_env_manager.generating_args == config.actor_infer.generating_args


def test_overrides_change_the_fields_they_name():
    config = load_agentic_config(*CPU, overrides=["seed=123", "actor_train.training_args.learning_rate=1e-5",
                                          "train_env_manager.group_size=4", "exp_name=my_new_experiment"])
    assert config.seed == 123
    assert config.actor_train.training_args.learning_rate == pytest.approx(1e-5)
    assert config.train_env_manager.group_size == 4
    assert config.exp_name == "my_new_experiment"
    assert config.output_dir.endswith("my_new_experiment")  # interpolations see the override


def test_override_of_a_key_the_yaml_leaves_out_still_applies():
    config = load_agentic_config(*CPU, overrides=["critic_warmup=3", "actor_train.training_args.adam_beta2=0.95"])
    assert config.critic_warmup == 3
    assert config.actor_train.training_args.adam_beta2 == pytest.approx(0.95)


@requires_roll_examples
def test_roll_example_loads_with_warnings_only_for_keys_without_effect(caplog):
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        config = load_agentic_config(ROLL_DIR, "agent_val_frozen_lake")
    assert config.actor_train.strategy_args.strategy_name == "megatron_train"
    assert config.custom_envs["SimpleSokoban"].env_config["dim_room"] == [6, 6]
    # max_tokens_per_step is overridden to 64 at the top level and reaches the env through interpolation
    assert config.custom_envs["FrozenLake"].max_tokens_per_step == 64
    assert config.custom_envs["FrozenLake"].env_manager_cls.endswith("traj_env_manager.TrajEnvManager")
    messages = [r.getMessage() for r in caplog.records]
    assert messages, "ROLL's keys without effect should be reported"
    assert all("has no effect in roll" in m for m in messages)
    # one line per key, even though use_thread_lock appears in six env blocks
    assert sum("use_thread_lock" in m for m in messages) == 1


@requires_roll_examples
def test_roll_env_manager_class_path_resolves_to_ours():
    import importlib

    config = load_agentic_config(ROLL_DIR, "agent_val_frozen_lake")
    path = config.custom_envs["FrozenLake"].env_manager_cls
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert cls.__module__.startswith("roll.pipeline.agentic.env_manager")
    assert (REPO_ROOT / "roll" / "pipeline" / "agentic" / "env_manager" / "traj_env_manager.py").is_file()
