"""Groups whose scores are all equal carry no gradient under GRPO: dropped, counted, and only then."""

from __future__ import annotations

import torch

from roll.data.batch import Batch
from roll.pipeline.agentic.advantage_step import compute_advantage_step
from roll.pipeline.agentic.agentic_config import AgenticConfig, load_agentic_config
from roll.pipeline.agentic.group_filter import (
    copy_back_rewards,
    drop_zero_gradient_groups,
    equal_score_groups,
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


def test_blockers_name_every_term_that_still_moves_equal_groups():
    assert zero_gradient_blockers(cpu_config("entropy_loss_coef=0.01")) == [
        "entropy_loss_coef adds an entropy term on every sample"]
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
