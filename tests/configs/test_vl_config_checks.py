"""Image observations are checked at load time: `render_mode: rgb_array` needs an env that draws its
board, a manager that shows images (VLTrajEnvManager) and an inference engine that takes them."""

import pytest

from roll.configs import ConfigError
from roll.launch.cpu_mode import adjust_for_cpu
from roll.launch.loader import load_agentic_config

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
VL_MANAGER = "roll.pipeline.agentic.env_manager.vl_traj_env_manager.VLTrajEnvManager"
IMAGES = "++custom_envs.FrozenLakeCPU.env_config.render_mode=rgb_array"


def load_error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=["pretrain=tiny-random-qwen2", *overrides])
    return str(info.value)


def test_images_with_the_text_manager_name_the_vl_manager():
    message = load_error(IMAGES)
    assert "custom_envs.FrozenLakeCPU.env_config.render_mode" in message and VL_MANAGER in message


def test_images_need_an_engine_that_takes_them():
    message = load_error(IMAGES, f"custom_envs.FrozenLakeCPU.env_manager_cls={VL_MANAGER}",
                         "actor_infer.strategy_args.strategy_name=vllm")
    assert "actor_infer.strategy_args.strategy_name: vllm does not take images" in message and "hf_infer" in message


def test_cpu_picks_the_tiny_vision_language_model_for_image_envs():
    config = load_agentic_config(*CPU, overrides=[IMAGES, f"custom_envs.FrozenLakeCPU.env_manager_cls={VL_MANAGER}"])
    lines = adjust_for_cpu(config, keep_pretrain=False)
    assert config.pretrain == "tiny-random-qwen2.5-vl" and any(line.startswith("pretrain:") for line in lines)
