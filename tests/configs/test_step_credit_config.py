"""The step-credit keys load from ROLL's GiGPO config, and the combinations that cannot work are refused."""

from __future__ import annotations

import pytest

from roll.configs import ConfigError
from roll.launch.loader import load_agentic_config
from tests.conftest import roll_examples

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
STEP = ["adv_estimator=gigpo",
        "custom_envs.FrozenLakeCPU.env_manager_cls=roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager"]


def test_roll_gigpo_config_sets_the_step_credit_keys():
    config = load_agentic_config(roll_examples("qwen2.5-0.5B-agentic"), "agent_val_frozen_lake_gigpo",
                                 overrides=["pretrain=tiny-random-qwen2"])
    assert (config.adv_estimator, config.batch_adjust_mode) == ("gigpo", "copy")
    assert (config.step_reward_gamma, config.episode_reward_weight, config.step_reward_weight) == (0.95, 1.0, 1.0)
    spec = config.custom_envs["FrozenLake"]
    assert spec.history_length == 5 and spec.env_manager_cls.endswith("step_env_manager.StepEnvManager")


def test_a_step_wise_manager_with_gigpo_loads_and_whiten_rewards_is_refused():
    assert load_agentic_config(*CPU, overrides=STEP).adv_estimator == "gigpo"
    with pytest.raises(ConfigError, match="whiten_rewards rescales the episode reward that adv_estimator: gigpo replaces"):
        load_agentic_config(*CPU, overrides=[*STEP, "whiten_rewards=true"])
    with pytest.raises(ConfigError, match="history_length must be >= 0"):
        load_agentic_config(*CPU, overrides=[*STEP, "++custom_envs.FrozenLakeCPU.history_length=-1"])


def test_traj_gigpo_loads_with_the_trajectory_manager_and_refuses_a_step_wise_one():
    assert load_agentic_config(*CPU, overrides=["adv_estimator=traj_gigpo"]).adv_estimator == "traj_gigpo"
    with pytest.raises(ConfigError, match="traj_gigpo gives each turn of a whole-episode sample its own advantage, "
                                          "but custom_envs.FrozenLakeCPU.env_manager_cls is .*StepEnvManager"):
        load_agentic_config(*CPU, overrides=["adv_estimator=traj_gigpo", STEP[1]])


def test_cap_idle_turn_advantage_reaches_the_estimator_options_with_gigpo():
    from roll.pipeline.agentic.advantage_step import estimator_options

    config = load_agentic_config(*CPU, overrides=[*STEP, "cap_idle_turn_advantage=true"])
    assert estimator_options(config)["cap_idle_turn_advantage"] is True
    assert estimator_options(load_agentic_config(*CPU, overrides=STEP))["cap_idle_turn_advantage"] is False
    with pytest.raises(ConfigError, match="cap_idle_turn_advantage: expected true or false, got 'yes'"):
        load_agentic_config(*CPU, overrides=[*STEP, "cap_idle_turn_advantage=yes"])
