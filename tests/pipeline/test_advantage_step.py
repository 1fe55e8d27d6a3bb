"""The config → algorithms mapping of one batch (docs/algorithms.md, steps 6-8), checked against hand-worked numbers."""

import statistics

import pytest
import torch

from roll.configs.base_config import BaseConfig, RewardNormalizationConfig
from roll.data.batch import Batch
from roll.pipeline.agentic.advantage_step import compute_advantage_step, reward_groups


def two_turn_batch(scores: list[float], groups: list[int]) -> Batch:
    # Each row: prompt (2 tokens), response (2), observation (2), response (1), padding (1).
    mask_row = [0, 0, 1, 1, 0, 0, 1, 0]
    n = len(scores)
    return Batch(
        tensors={
            "response_mask": torch.tensor([mask_row] * n),
            "attention_mask": torch.tensor([[1] * 7 + [0]] * n),
            "scores": torch.tensor(scores),
        },
        meta={"traj_group_id": groups, "tag": ["A"] * n},
    )


def config(**overrides) -> BaseConfig:
    base = dict(adv_estimator="grpo", gamma=1.0, whiten_advantages=False, advantage_clip=None, reward_clip=None,
                reward_normalization=RewardNormalizationConfig(grouping="traj_group_id", method="mean_std"))
    base.update(overrides)
    return BaseConfig(**base)


def test_grpo_advantage_is_the_group_normalised_score_on_every_response_token():
    scores, groups = [1.0, 0.0, 0.0, 2.0, 2.0, 5.0], [0, 0, 0, 1, 1, 1]
    batch = two_turn_batch(scores, groups)
    compute_advantage_step(batch, config(), kl_coef=0.0)
    for i, score in enumerate(scores):
        members = [s for s, g in zip(scores, groups) if g == groups[i]]
        expected = (score - statistics.mean(members)) / (statistics.stdev(members) + 1e-6)
        adv = batch["advantages"][i]
        assert adv[[2, 3, 6]].tolist() == pytest.approx([expected] * 3, abs=1e-5)  # gamma 1: same on all response tokens
        assert adv[[0, 1, 4, 5, 7]].abs().sum() == 0  # never on prompt, observation or padding


def test_reinforce_with_discount_and_batch_grouping():
    scores = [1.0, 3.0]
    batch = two_turn_batch(scores, [0, 1])
    cfg = config(adv_estimator="reinforce", gamma=0.5,
                 reward_normalization=RewardNormalizationConfig(grouping="batch", method="mean"))
    compute_advantage_step(batch, cfg, kl_coef=0.0)
    # batch mean 2 → rewards -1, +1 on the last response token (position 6); gamma steps over response tokens only
    for i, r in enumerate([-1.0, 1.0]):
        assert batch["advantages"][i][[2, 3, 6]].tolist() == pytest.approx([r * 0.25, r * 0.5, r])


def test_token_level_kl_is_subtracted_when_asked():
    batch = two_turn_batch([1.0], [0])
    batch.tensors["old_logprobs"] = torch.full((1, 8), -1.0)
    batch.tensors["ref_logprobs"] = torch.full((1, 8), -1.5)
    cfg = config(adv_estimator="reinforce", add_token_level_kl=True, kl_penalty="kl",
                 reward_normalization=RewardNormalizationConfig(method="identity"))
    metrics = compute_advantage_step(batch, cfg, kl_coef=0.1)
    # k1 = old - ref = 0.5 per response token; rewards: -0.05 at 2, 3 and 1 - 0.05 at 6
    assert batch["token_level_rewards"][0].tolist() == pytest.approx([0, 0, -0.05, -0.05, 0, 0, 0.95, 0])
    assert metrics["critic/kl"] == pytest.approx(0.5)


def test_grouping_by_tags_and_unknown_key():
    batch = two_turn_batch([1.0, 2.0], [0, 1])
    assert reward_groups(batch, "tags") == ["A", "A"]
    with pytest.raises(KeyError, match="grouping 'difficulty'"):
        reward_groups(batch, "difficulty")
