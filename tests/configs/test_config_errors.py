"""Every bad config fails at load time with a message that names the key and the fix."""

import subprocess
import sys
import time

import pytest

from roll.configs import ConfigError
from roll.launch.runtime_checks import check_runnable
from roll.launch.loader import load_agentic_config
from tests.conftest import REPO_ROOT

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


def load_error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=list(overrides))
    return str(info.value)


def test_misspelt_top_level_key_suggests_the_right_one():
    message = load_error("sed=123")
    assert "sed" in message and "Did you mean 'seed'" in message
    assert "agent_val_frozen_lake.yaml" in message  # names the file


def test_misspelt_nested_key_names_its_full_path():
    message = load_error("actor_train.training_args.learning_rat=1e-5")
    assert "actor_train.training_args.learning_rat" in message and "'learning_rate'" in message


def test_misspelt_env_config_key_names_the_env_and_the_right_key():
    message = load_error("custom_envs.FrozenLakeCPU.env_config.is_slipery=true")
    assert "custom_envs.FrozenLakeCPU.env_config.is_slipery" in message
    assert "'is_slippery'" in message and "frozen_lake" in message


def test_batch_not_a_multiple_of_group_size_proposes_sizes():
    message = load_error("rollout_batch_size=30")
    assert "rollout_batch_size=30" in message and "group_size=8" in message
    assert "rollout_batch_size=24" in message and "32" in message
    # below one group there is one size to propose, said once
    assert "Use rollout_batch_size=8, or change group_size" in load_error("rollout_batch_size=2")


def test_missing_tag_names_the_defined_envs():
    message = load_error("train_env_manager.tags=[FrozenLak]")
    assert "'FrozenLak' is not defined in custom_envs" in message and "'FrozenLakeCPU'" in message


def test_partition_that_does_not_sum():
    message = load_error("train_env_manager.num_groups_partition=[3]")
    assert "sums to 3" in message and "num_env_groups is 4" in message


def test_partition_split_evenly_when_absent():
    config = load_agentic_config(*CPU, overrides=["train_env_manager.num_env_groups=5",
                                          "train_env_manager.tags=[FrozenLakeCPU,FrozenLakeCPU2]",
                                          "+custom_envs.FrozenLakeCPU2=${custom_envs.FrozenLakeCPU}",
                                          "rollout_batch_size=40"])
    assert config.train_env_manager.num_groups_partition == [3, 2]


def test_bad_device_mapping_string():
    message = load_error("actor_train.device_mapping='list(range(0,8)'")
    assert "actor_train.device_mapping" in message and "list(range(0,8))" in message


def test_unknown_strategy_name_suggests_the_closest():
    message = load_error("actor_train.strategy_args.strategy_name=hf_trian")
    assert "actor_train.strategy_args.strategy_name" in message and "'hf_train'" in message


def test_wrong_type_names_the_key():
    message = load_error("rollout_batch_size=many")
    assert "rollout_batch_size" in message and "integer" in message


def test_pretrain_path_that_does_not_exist_fails_the_machine_check():
    config = load_agentic_config(*CPU, overrides=["pretrain=/nonexistent/model"])
    with pytest.raises(ConfigError) as info:
        check_runnable(config)
    assert "/nonexistent/model" in str(info.value) and "does not exist" in str(info.value)


def test_guide_config_without_vllm_installed_explains_how_to_install_it_and_points_to_cpu_example():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this environment")
    config = load_agentic_config("examples/qwen2.5-0.5B-agentic_ds", "agent_val_frozen_lake")
    with pytest.raises(ConfigError) as info:
        check_runnable(config)
    message = str(info.value)
    assert "actor_infer.strategy_args.strategy_name" in message and "vLLM, which is not installed" in message
    assert "scripts/setup_vllm.sh" in message and "smollm2-135M-agentic_cpu" in message


def test_launcher_fails_fast_before_ray_starts():
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "examples/start_agentic_pipeline.py", "--config_path", CPU[0], "--config_name", CPU[1], "sed=123"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "Did you mean 'seed'" in result.stderr
    assert "Ray" not in result.stdout + result.stderr.replace("Did you mean", "")
    assert time.monotonic() - start < 60


def test_bad_env_config_value_names_the_env_and_key():
    message = load_error("custom_envs.FrozenLakeCPU.env_config.p=1.5")
    assert "custom_envs.FrozenLakeCPU.env_config" in message and "p" in message


def test_restart_limits_below_minus_one_name_the_key():
    message = load_error("max_infer_worker_restarts=-2")
    assert "max_infer_worker_restarts must be >= 0 (or -1 for no limit), got -2" in message
    config = load_agentic_config(*CPU, overrides=["max_infer_worker_restarts=-1"])
    assert config.max_infer_worker_restarts == -1


def test_weight_sync_buckets_under_one_mb_name_the_key_and_rolls_key_is_taken():
    message = load_error("model_update_buffer_size_mb=0")
    assert "model_update_buffer_size_mb must be >= 1 (MB per bucket of a weight sync), got 0" in message
    assert load_agentic_config(*CPU).model_update_buffer_size_mb == 32  # the CPU example's own value
    assert load_agentic_config(*CPU, overrides=["model_update_buffer_size_mb=256"]).model_update_buffer_size_mb == 256


def test_negative_entropy_floor_names_the_key_and_its_unit():
    message = load_error("entropy_floor=-0.1")
    assert "entropy_floor" in message and "nats" in message and "-0.1" in message


def test_random_action_rate_is_a_training_share_below_one():
    assert "[0, 1)" in load_error("train_env_manager.random_action_rate=1.0")
    assert "[0, 1)" in load_error("train_env_manager.random_action_rate=-0.1")
    message = load_error("val_env_manager.random_action_rate=0.1")
    assert "validation measures the policy" in message and "train_env_manager" in message
    message = load_error("train_env_manager.random_action_rate=0.1",
                         "train_infer_correction.is_weight.enabled=true")
    assert "random_action_rate=0.1" in message and "train_infer_correction" in message
    config = load_agentic_config(*CPU, overrides=["train_env_manager.random_action_rate=0.1"])
    assert config.train_env_manager.random_action_rate == 0.1


def test_negative_pg_min_token_entropy_names_the_key():
    message = load_error("pg_min_token_entropy=-0.1")
    assert "pg_min_token_entropy" in message and "nats" in message and "-0.1" in message


def test_negative_entropy_floor_min_token_entropy_names_the_key():
    message = load_error("entropy_floor_min_token_entropy=-0.5")
    assert "entropy_floor_min_token_entropy" in message and "nats" in message and "-0.5" in message


def test_an_unknown_fsdp2_setting_is_refused_at_load_time():
    message = load_error("actor_train.strategy_args.strategy_name=fsdp2_train",
                         "++actor_train.strategy_args.strategy_config={offload: true}")
    assert "actor_train.strategy_args.strategy_config: ['offload'] are not fsdp2_train settings" in message
    assert "offload_policy" in message  # the key meant
    message = load_error("actor_train.strategy_args.strategy_name=fsdp2_train",
                         "++actor_train.strategy_args.strategy_config={offload_policy: 1}")
    assert "actor_train.strategy_args.strategy_config.offload_policy must be true or false" in message
