"""Groups whose scores are all equal carry no gradient under GRPO: dropped, counted, and only then."""

from __future__ import annotations

import torch

from roll.data.batch import Batch
from roll.pipeline.agentic.advantage_step import compute_advantage_step
from roll.configs.agentic_config import AgenticConfig
from roll.launch.loader import load_agentic_config
from roll.pipeline.agentic.group_filter import (
    copy_back_rewards,
    drop_zero_gradient_groups,
    equal_score_groups,
    zero_credit_groups,
    zero_gradient_blockers,
)
from tests.conftest import REPO_ROOT

CPU_EXAMPLE = REPO_ROOT / "examples" / "smollm2-135M-agentic_cpu"


def grouped_batch(scores: list[float], groups: list[str]) -> Batch:
    response_mask = torch.zeros(len(scores), 6, dtype=torch.long)
    response_mask[:, 2:5] = 1
    return Batch(tensors={"scores": torch.tensor(scores), "response_mask": response_mask},
                 meta={"traj_group_id": groups})


def cpu_config(*overrides: str) -> AgenticConfig:
    return load_agentic_config(CPU_EXAMPLE, "agent_val_frozen_lake", list(overrides))


def test_equal_group_dropped_mixed_group_kept_and_counted():
    batch = grouped_batch([0, 0, 0, 1, 1, 1, -0.1, -0.1, -0.1], ["a"] * 3 + ["b"] * 3 + ["c"] * 3)
    batch.tensors["scores"][4] = 0.0  # group b is now mixed: 1, 0, 1
    kept, metrics = drop_zero_gradient_groups(batch, enabled=True, blockers=[])
    assert kept == [3, 4, 5]
    assert metrics == {"batch/groups_dropped": 2.0, "batch/groups_kept": 1.0, "batch/samples_trained": 3.0}


def test_disabled_or_blocked_keeps_everything():
    batch = grouped_batch([1, 1, 0, 0], ["a", "a", "b", "b"])
    assert drop_zero_gradient_groups(batch, enabled=False, blockers=[])[0] == [0, 1, 2, 3]
    kept, metrics = drop_zero_gradient_groups(batch, enabled=True, blockers=["entropy_loss_coef adds ..."])
    assert kept == [0, 1, 2, 3] and metrics["batch/groups_dropped"] == 0.0


def test_all_groups_equal_leaves_nothing_to_train():
    kept, metrics = drop_zero_gradient_groups(grouped_batch([0.5] * 4, ["a", "a", "b", "b"]), True, [])
    assert kept == [] and metrics["batch/samples_trained"] == 0.0


def test_too_few_samples_for_the_ranks_keeps_the_batch():
    batch = grouped_batch([1, 0, 2, 2, 3, 3], ["a", "a", "b", "b", "c", "c"])
    assert drop_zero_gradient_groups(batch, True, [], min_samples=2)[0] == [0, 1]
    assert drop_zero_gradient_groups(batch, True, [], min_samples=4)[0] == [0, 1, 2, 3, 4, 5]


def test_dropped_groups_are_exactly_those_with_zero_advantage_in_the_cpu_example():
    # The premise, checked with the real advantage step under the CPU example's config.
    config = cpu_config()
    assert zero_gradient_blockers(config) == []
    scores = [0.0, 0.0, 1.0, 0.0, -0.3, -0.3, -0.3, -0.3, 0.9, 1.0, 0.9, 1.0]
    groups = ["g0"] * 4 + ["g1"] * 4 + ["g2"] * 4
    batch = grouped_batch(scores, groups)
    compute_advantage_step(batch, config, kl_coef=0.0)
    zero = {g for g in groups if not batch["advantages"][[i for i, x in enumerate(groups) if x == g]].any()}
    assert zero == equal_score_groups(batch["scores"], groups) == {"g1"}


def test_traj_gigpo_drops_exactly_the_groups_whose_every_turn_advantage_is_zero():
    # Whole-episode rows of two turns each (reply tokens 1-2 and 4-5), under the real advantage step.
    config = cpu_config("adv_estimator=traj_gigpo")
    assert zero_gradient_blockers(config) == []
    episodes = {  # group: [(states the two turns acted in, the two turns' rewards)] x 2 episodes
        "same": [("AB", [-0.1, -0.1]), ("AB", [-0.1, -0.1])],  # one episode twice: every term 0
        "shared_state_differs": [("AB", [0.1, -0.1]), ("AC", [-0.1, 0.1])],  # equal scores, state A's returns differ
        "states_apart": [("AB", [0.0, 0.2]), ("CD", [0.2, 0.0])],  # equal scores, no state shared: each turn alone
        "scores_differ": [("AB", [0.0, 0.0]), ("AB", [0.0, 1.0])],
    }
    groups = [g for g, eps in episodes.items() for _ in eps]
    batch = grouped_batch([sum(r) for eps in episodes.values() for _, r in eps], groups)
    batch.tensors["response_mask"] = torch.tensor([[0, 1, 1, 0, 1, 1]] * len(groups))
    batch.meta.update(step_rewards=[r for eps in episodes.values() for _, r in eps],
                      turn_state_keys=[list(s) for eps in episodes.values() for s, _ in eps])
    compute_advantage_step(batch, config, kl_coef=0.0)
    zero = {g for g in groups if not batch["advantages"][[i for i, x in enumerate(groups) if x == g]].abs().gt(1e-6).any()}
    assert zero == zero_credit_groups(batch, config.step_reward_gamma) == {"same", "states_apart"}
    kept, metrics = drop_zero_gradient_groups(batch, True, [], step_gamma=config.step_reward_gamma)
    assert kept == [2, 3, 6, 7] and metrics["batch/groups_dropped"] == 2.0
    # without the step returns (GRPO's check) the group whose shared state's returns differ would go too
    assert equal_score_groups(batch["scores"], groups) == {"same", "shared_state_differs", "states_apart"}


def test_blockers_name_every_term_that_still_moves_equal_groups():
    assert zero_gradient_blockers(cpu_config("entropy_loss_coef=0.01")) == [
        "entropy_loss_coef adds an entropy term on every sample"]
    assert zero_gradient_blockers(cpu_config("entropy_floor=0.05")) == [
        "entropy_floor adds an entropy term on every sample below the floor"]
    assert any("whiten_advantages" in r for r in zero_gradient_blockers(cpu_config("whiten_advantages=true")))
    assert any("use_kl_loss" in r for r in zero_gradient_blockers(cpu_config("use_kl_loss=true", "kl_loss_coef=0.1")))
    assert any("grouping" in r for r in zero_gradient_blockers(cpu_config("reward_normalization.grouping=batch")))
    assert any("group mean" in r for r in zero_gradient_blockers(cpu_config("reward_normalization.method=identity")))
    assert any("adv_estimator" in r for r in zero_gradient_blockers(AgenticConfig()))  # gae: a critic
    assert zero_gradient_blockers(cpu_config("actor_train.pg_variant=kimi15")) == [
        "pg_variant kimi15 adds a squared log-ratio term on every sample"]
    assert zero_gradient_blockers(cpu_config("actor_train.pg_variant=topr")) == []  # −w·A·logp: 0 when A is 0


def test_copy_back_rewards_fills_dropped_groups_with_zero():
    batch = grouped_batch([0, 0, 1, 0], ["a", "a", "b", "b"])
    trained = batch.index([2, 3])
    trained.tensors["response_level_rewards"] = torch.tensor([0.5, -0.5])
    copy_back_rewards(batch, trained, [2, 3])
    assert batch["response_level_rewards"].tolist() == [0.0, 0.0, 0.5, -0.5]
