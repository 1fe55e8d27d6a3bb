"""The staleness filter of async training (roll/pipeline/agentic/async_rollout.py) on real batches."""

import pytest

from roll.pipeline.agentic.async_rollout import drop_stale_groups
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch


def sample(group: str, versions: list[int]) -> Trajectory:
    tokens = TokenBuffer()
    tokens.add_prompt([1, 2])
    for v in versions:  # one turn per version: an episode that spanned a weight sync
        tokens.add_response([3, 4], [-0.5, -0.25], weight_version=v)
        tokens.add_prompt([5])
    return Trajectory.from_tokens(tokens, score=0.0, step_rewards=[0.0], actions=["a"], messages=[], env_metrics={},
                                  tag="t", env_seed=0, stop_reason="terminated", generated_tokens=2,
                                  traj_group_id=group, traj_id=f"{group}-{len(versions)}")


def test_a_sample_carries_the_oldest_version_of_its_tokens():
    assert sample("g", [4, 3, 5]).weight_version == 3
    assert sample("g", [-1, 6]).weight_version == 6  # an unknown version does not hide a known one
    assert sample("g", [-1]).weight_version == -1


def test_groups_with_a_sample_older_than_the_ratio_are_dropped_whole():
    trajs = [sample("g0", [5]), sample("g0", [5, 6]),  # staleness 1 and 1: kept
             sample("g1", [6]), sample("g1", [4, 6]),  # one sample 2 behind at step 6: the whole group goes
             sample("g2", [6]), sample("g2", [-1])]  # unknown version: kept, not in the statistics
    batch = trajectories_to_batch(trajs, pad_token_id=0)
    assert batch.meta["weight_version"] == [5, 5, 6, 4, 6, -1]
    kept, metrics = drop_stale_groups(batch, step=6, ratio=1)
    assert kept.meta["traj_group_id"] == ["g0", "g0", "g2", "g2"]
    assert kept.tensors["input_ids"].shape[0] == 4
    assert metrics["async/dropped_samples"] == 2.0
    assert metrics["async/staleness_max"] == 1.0
    assert metrics["async/staleness_mean"] == pytest.approx((1 + 1 + 0) / 3)
    same, metrics = drop_stale_groups(batch, step=6, ratio=2)
    assert len(same) == 6 and metrics["async/dropped_samples"] == 0.0 and metrics["async/staleness_max"] == 2.0
