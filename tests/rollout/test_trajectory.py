"""The typed sample (Trajectory), its token buffer, and the one Trajectory -> Batch function."""

from __future__ import annotations

import pytest
import torch

from roll.data.episodes import first_row_per_episode
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory
from roll.pipeline.agentic.trajectory_batch import one_per_episode, rollout_metrics, trajectories_to_batch


def sample(tokens: TokenBuffer, tag: str = "A", score: float = 1.0, **fields) -> Trajectory:
    values = dict(score=score, step_rewards=[score], actions=["<answer>Left</answer>"],
                  messages=[{"role": "user", "content": "go"}], env_metrics={"success": score, "num_actions": 1.0},
                  tag=tag, env_seed=3, stop_reason="terminated", generated_tokens=sum(tokens.response_mask))
    values.update(fields)
    return Trajectory.from_tokens(tokens, **values)


def test_token_buffer_appends_ids_mask_and_logprobs_together():
    buf = TokenBuffer()
    buf.add_prompt([5, 6, 7])
    buf.add_response([8, 9], [-0.5, -1.25])
    buf.add_prompt([10])
    buf.add_response([11], [-2.0])
    assert buf.input_ids == [5, 6, 7, 8, 9, 10, 11]
    assert buf.response_mask == [0, 0, 0, 1, 1, 0, 1]
    assert buf.logprobs == [0.0, 0.0, 0.0, -0.5, -1.25, 0.0, -2.0]
    assert len(buf) == 7
    with pytest.raises(ValueError, match="2 tokens came with 1 log-probs"):
        buf.add_response([1, 2], [-0.1])
    assert len(buf) == 7 and len(buf.response_mask) == 7 and len(buf.logprobs) == 7  # nothing half-appended


def test_a_trajectory_refuses_rows_of_different_lengths_and_unknown_stop_reasons():
    with pytest.raises(ValueError, match="differ in length"):
        Trajectory(input_ids=[1, 2], response_mask=[0], infer_logprobs=[0.0, 0.0], score=0.0, step_rewards=[],
                   actions=[], messages=[], env_metrics={}, tag="A", env_seed=0, stop_reason="terminated",
                   generated_tokens=0)
    buf = TokenBuffer()
    buf.add_prompt([1])
    with pytest.raises(ValueError, match="stop_reason"):
        sample(buf, stop_reason="bored")


def test_trajectories_become_a_right_padded_batch_with_their_meta():
    short, long = TokenBuffer(), TokenBuffer()
    short.add_prompt([5, 6])
    short.add_response([7], [-0.5])
    long.add_prompt([1, 2, 3])
    long.add_response([4, 9], [-1.0, -2.0])
    a = sample(short, tag="A", score=1.0, traj_id="t-0", traj_group_id="t", extras={"note": "x"})
    b = sample(long, tag="B", score=-0.5, traj_id="t-1", traj_group_id="t", step_index=2, state_key="P_G")
    batch = trajectories_to_batch([a, b], pad_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 0, 0], [1, 2, 3, 4, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 0], [0, 1, 2, 3, 4]]
    assert batch["response_mask"].tolist() == [[0, 0, 1, 0, 0], [0, 0, 0, 1, 1]]
    assert torch.equal(batch["infer_logprobs"], torch.tensor([[0, 0, -0.5, 0, 0], [0, 0, 0, -1.0, -2.0]]))
    assert batch["scores"].tolist() == [1.0, -0.5]
    assert batch["input_ids"].dtype == torch.long and batch["infer_logprobs"].dtype == torch.float32
    assert batch["tag"] == ["A", "B"] and batch["traj_id"] == ["t-0", "t-1"] and batch["env_seed"] == [3, 3]
    assert batch["step_index"] == [None, 2] and batch["state_key"] == [None, "P_G"]
    assert batch["note"] == ["x", None]  # an extra becomes a meta column, None where a sample lacks it
    assert batch["stop_reason"] == ["terminated", "terminated"]


def test_batching_refuses_no_samples_and_extras_that_shadow_batch_keys():
    buf = TokenBuffer()
    buf.add_prompt([1])
    with pytest.raises(ValueError, match="no trajectories"):
        trajectories_to_batch([], pad_token_id=0)
    with pytest.raises(ValueError, match=r"\['tag'\] shadow"):
        trajectories_to_batch([sample(buf, extras={"tag": "other"})], pad_token_id=0)


def test_rollout_metrics_are_per_tag_means():
    one, two = TokenBuffer(), TokenBuffer()
    one.add_response([1, 2], [-1.0, -1.0])
    two.add_response([3, 4, 5, 6], [-1.0] * 4)
    metrics = rollout_metrics([sample(one, tag="A", score=1.0), sample(two, tag="A", score=0.0),
                               sample(one, tag="B", score=0.5)], prefix="val/env")
    assert metrics["val/env/A/success"] == 0.5 and metrics["val/env/B/success"] == 0.5
    assert metrics["val/env/A/score"] == 0.5 and metrics["val/env/A/response_length"] == 3.0
    assert metrics["val/env/B/response_length"] == 2.0


def test_rollout_metrics_count_each_episode_of_step_samples_once():
    turn = TokenBuffer()
    turn.add_response([1, 2], [-1.0, -1.0])
    # a 3-turn episode that succeeded (3 step samples) and a 1-turn episode that failed
    won = [sample(turn, score=1.0, traj_id="g0-0", step_index=t, state_key=f"s{t}") for t in range(3)]
    lost = [sample(turn, score=0.0, env_metrics={"success": 0.0, "num_actions": 1.0}, traj_id="g0-1", step_index=0,
                   state_key="s0")]
    metrics = rollout_metrics(won + lost)
    assert metrics["env/A/success"] == 0.5 and metrics["env/A/score"] == 0.5  # per episode, not 3 to 1
    assert metrics["env/A/response_length"] == 2.0
    # what the scheduler sums for rollout/num_actions: 2 episodes, not 4 samples
    assert [t.traj_id for t in one_per_episode(won + lost)] == ["g0-0", "g0-1"]
    whole = [sample(turn), sample(turn)]  # trajectory-wise samples (no step_index) are each an episode
    assert len(one_per_episode(whole)) == 2


def test_an_agent_runners_episode_of_several_samples_counts_once():
    # an agent that rewrote its history: its episode is two samples (no step_index), one traj_id
    turn = TokenBuffer()
    turn.add_response([1, 2], [-1.0, -1.0])
    rewritten = [sample(turn, score=1.0, traj_id="val6-g29-0") for _ in range(2)]
    lost = [sample(turn, score=0.0, env_metrics={"success": 0.0, "num_actions": 1.0}, traj_id="val6-g30-0")]
    metrics = rollout_metrics(rewritten + lost, prefix="val/env")
    assert metrics["val/env/A/success"] == 0.5 and metrics["val/env/A/score"] == 0.5  # not 2 wins to 1 loss
    batch = trajectories_to_batch(rewritten + lost, pad_token_id=0)
    assert first_row_per_episode(batch) == [0, 2]
