"""agent_runner_cls and ProxyEnvManager: ROLL's agent-runner config and the example load; the
combinations that cannot run are refused before any worker starts, naming the key."""

from __future__ import annotations

import pytest

from roll.configs import ConfigError
from roll.launch.loader import load_agentic_config
from tests.conftest import roll_examples

EXAMPLE = ("examples/agents", "agent_grid")
CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
PROXY = "roll.pipeline.agentic.env_manager.proxy_env_manager.ProxyEnvManager"
GEM = "roll.pipeline.agentic.agent_runner.gem_runner.GEMRunner"
ENTRY = "custom_envs.FrozenLakeCPU"


def test_roll_agent_runner_config_loads_with_the_proxy_manager_and_gem_runner():
    config = load_agentic_config(roll_examples("qwen2.5-0.5B-agentic"), "agentic_val_sokoban_agent_runner",
                                 overrides=["pretrain=tiny-random-qwen2"])
    spec = config.custom_envs["SimpleSokoban"]
    assert (spec.env_manager_cls, spec.agent_runner_cls) == (PROXY, GEM)


def test_the_example_agent_config_loads_without_a_roll_env():
    spec = load_agentic_config(*EXAMPLE).custom_envs["GridAgent"]
    assert spec.env_type is None and spec.agent_runner_cls == "examples.agents.grid_agent.GridAgent"


@pytest.mark.parametrize("overrides,message", [
    ([f"++{ENTRY}.agent_runner_cls={GEM}"], f"{ENTRY}.agent_runner_cls: '{GEM}' is run only by env_manager_cls"),
    ([f"{ENTRY}.env_manager_cls={PROXY}"], f"{ENTRY}.agent_runner_cls: {PROXY} runs an agent runner"),
    ([f"{ENTRY}.env_manager_cls={PROXY}", f"++{ENTRY}.agent_runner_cls=my_pkg.NoAgent"],
     f"{ENTRY}.agent_runner_cls: cannot import 'my_pkg.NoAgent'"),
    ([f"{ENTRY}.env_manager_cls={PROXY}", f"++{ENTRY}.agent_runner_cls=roll.configs.ConfigError"],
     "has no run_episode"),
    ([f"{ENTRY}.env_type=null"], f"{ENTRY}.env_type: null is only for an agent runner"),
    ([f"{ENTRY}.env_manager_cls={PROXY}", f"++{ENTRY}.agent_runner_cls={GEM}", f"{ENTRY}.env_type=null"],
     f"{ENTRY}.env_type: {GEM} plays a roll env"),
    ([f"{ENTRY}.env_manager_cls={PROXY}", f"++{ENTRY}.agent_runner_cls={GEM}", "sft_warmup.steps=2",
      "sft_warmup.policy=optimal"], "sft_warmup.policy: 'optimal' plays a roll env, and 'FrozenLakeCPU' is played by an agent runner"),
    ([f"{ENTRY}.env_manager_cls={PROXY}", f"++{ENTRY}.agent_runner_cls={GEM}", "sft_warmup.steps=0",
      "train_env_manager.random_action_rate=0.1"], "train_env_manager.random_action_rate: envs ['FrozenLakeCPU']"),
])
def test_what_cannot_run_is_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_agentic_config(*CPU, overrides=overrides)
