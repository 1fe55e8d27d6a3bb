"""rollout_mock replays a step-wise dump: its batch has one row per turn, but rollout_batch_size counts
episodes, so the size check counts episodes."""

from __future__ import annotations

import pytest

from roll.pipeline.agentic.rollout_dump import RecordedRollout, episode_count, save_batch
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch


def turn_sample(traj_id: str | None, step_index: int | None) -> Trajectory:
    tokens = TokenBuffer()
    tokens.add_prompt([3, 4])
    tokens.add_response([5], [-0.5])
    return Trajectory.from_tokens(tokens, score=1.0, step_rewards=[1.0], actions=["<answer>Up</answer>"],
                                  messages=[{"role": "user", "content": "go"}], env_metrics={"success": 1.0},
                                  tag="A", env_seed=1, stop_reason="terminated", generated_tokens=1,
                                  traj_id=traj_id, step_index=step_index, state_key="s" if step_index is not None else None)


def test_a_step_wise_dump_replays_with_the_episode_count_it_was_made_with(tmp_path):
    # two episodes of 3 and 2 turns: 5 rows, 2 episodes
    rows = [turn_sample("g0-0", t) for t in range(3)] + [turn_sample("g0-1", t) for t in range(2)]
    batch = trajectories_to_batch(rows, pad_token_id=0)
    assert len(batch) == 5 and episode_count(batch) == 2
    save_batch(batch, tmp_path, step=1)
    replay = RecordedRollout(build=lambda: pytest.fail("mock mode must not build a rollout"), dump_dirs=[],
                             mock_dir=str(tmp_path))
    assert len(replay.get_batch(2, step=1)) == 5
    with pytest.raises(ValueError, match="has 2 episodes but rollout_batch_size is 5"):
        replay.get_batch(5, step=1)


def test_trajectory_wise_rows_are_each_an_episode():
    batch = trajectories_to_batch([turn_sample("g0-0", None), turn_sample("g0-1", None), turn_sample(None, None)],
                                  pad_token_id=0)
    assert episode_count(batch) == 3
