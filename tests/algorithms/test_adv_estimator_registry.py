"""A registered advantage estimator is accepted by validation and used by the pipeline's advantage step."""

import pytest
import torch

from roll.algorithms import ADV_ESTIMATORS, AdvantageInputs, register_adv_estimator
from roll.configs import ConfigError
from roll.configs.base_config import BaseConfig, RewardNormalizationConfig
from roll.data.batch import Batch
from roll.launch.loader import load_agentic_config
from roll.pipeline.agentic.advantage_step import compute_advantage_step

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


@pytest.fixture
def registry(monkeypatch):
    """The estimator registry, restored after the test so registrations here do not leak."""
    monkeypatch.setattr(ADV_ESTIMATORS, "_entries", dict(ADV_ESTIMATORS._entries))
    return ADV_ESTIMATORS


def register_leave_one_out(name: str) -> None:
    @register_adv_estimator(name)
    def leave_one_out(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
        # RLOO: each trajectory's reward minus the mean reward of the other members of its group.
        groups = inputs.meta["traj_group_id"]
        rewards = inputs.response_level_rewards
        baseline = torch.stack([
            torch.stack([rewards[j] for j in range(len(groups)) if groups[j] == groups[i] and j != i]).mean()
            for i in range(len(groups))
        ])
        advantages = (rewards - baseline).unsqueeze(-1) * inputs.response_mask
        return advantages, advantages


def test_registered_estimator_drives_the_advantage_step(registry):
    register_leave_one_out("leave_one_out_test")
    mask_row = [0, 0, 1, 1, 0, 0, 1, 0]  # prompt 2, response 2, observation 2, response 1, padding 1
    batch = Batch(
        tensors={"response_mask": torch.tensor([mask_row] * 6), "scores": torch.tensor([1.0, 0.0, 0.0, 2.0, 2.0, 5.0])},
        meta={"traj_group_id": [0, 0, 0, 1, 1, 1], "tag": ["A"] * 6},
    )
    config = BaseConfig(adv_estimator="leave_one_out_test", reward_normalization=RewardNormalizationConfig(method="identity"))
    compute_advantage_step(batch, config, kl_coef=0.0)
    # group 0: 1 − mean(0, 0) = 1, 0 − mean(1, 0) = −0.5 (twice); group 1: 2 − 3.5 = −1.5 (twice), 5 − 2 = 3
    for row, expected in enumerate([1.0, -0.5, -0.5, -1.5, -1.5, 3.0]):
        assert batch["advantages"][row].tolist() == pytest.approx([0, 0, expected, expected, 0, 0, expected, 0])


def test_registered_name_validates_and_unknown_name_lists_the_registered(registry):
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=["adv_estimator=leave_one_out_test"])
    message = str(info.value)
    assert "adv_estimator" in message and "'leave_one_out_test'" in message
    assert all(f"'{name}'" in message for name in ("gae", "reinforce", "grpo"))

    register_leave_one_out("leave_one_out_test")
    config = load_agentic_config(*CPU, overrides=["adv_estimator=leave_one_out_test"])
    assert config.adv_estimator == "leave_one_out_test" and not config.uses_critic


def test_needs_values_turns_the_critic_on(registry):
    register_adv_estimator("critic_baseline_test", needs_values=True)(lambda inputs: (inputs.values, inputs.values))
    config = load_agentic_config(*CPU, overrides=["adv_estimator=critic_baseline_test"])
    assert config.uses_critic and config.critic is not None


def test_a_name_cannot_be_registered_twice_by_accident(registry):
    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_adv_estimator("grpo")(lambda inputs: (inputs.token_rewards, inputs.token_rewards))
