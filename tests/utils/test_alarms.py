"""Collapse alarms: a collapsed batch (identical replies, zero entropy, "!!!!") trips them with one
warning line; a healthy batch trips none; trends (validity falling, KL jumping) trip on history."""

from __future__ import annotations

import logging

import pytest
from transformers import AutoTokenizer

from roll.configs.errors import ConfigError
from roll.configs.report_config import AlarmConfig
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.pipeline.agentic.alarms import ALARMS, CollapseWatch, identical_reply_share, response_spans

HEALTHY_REPLIES = ["<answer>Left</answer>", "<answer>Down</answer>", "I go <answer>Right</answer>", "<answer>Up</answer>"]


def trajectory(tokenizer, replies: list[str], logprob: float, group: str) -> Trajectory:
    """A two-turn trajectory built like the env manager builds one: prompt, reply + eos, prompt, reply + eos."""
    tokens = TokenBuffer()
    for turn, reply in enumerate(replies):
        tokens.add_prompt(tokenizer(f"Turn {turn + 1}. Map:\n_P_G\nYour move?").input_ids)
        out = tokenizer(reply).input_ids + [tokenizer.eos_token_id]
        tokens.add_response(out, [logprob] * len(out))
    return Trajectory.from_tokens(tokens, score=0.0, step_rewards=[0.0] * len(replies), actions=replies, messages=[],
                                  env_metrics={}, tag="FrozenLake", env_seed=1, stop_reason="max_steps",
                                  generated_tokens=sum(tokens.response_mask), traj_group_id=group)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def batch_of(tokenizer, reply_of, logprob: float):
    trajs = [trajectory(tokenizer, [reply_of(g, i, t) for t in range(2)], logprob, f"g{g}") for g in range(2) for i in range(4)]
    return trajectories_to_batch(trajs, tokenizer.pad_token_id)


def test_collapsed_batch_trips_the_alarms_with_one_warning(tokenizer, caplog):
    batch = batch_of(tokenizer, lambda g, i, t: "!!!!!!!!!!!!!!!!!!!!!!!!", logprob=0.0)
    watch = CollapseWatch(AlarmConfig(), length_caps={"FrozenLake": 64})
    with caplog.at_level(logging.WARNING, logger="roll.alarms"):
        out = watch.check(batch, {"actor/entropy": 0.0, "env/FrozenLake/action_is_valid": 0.0}, step=7)
    assert out["collapse/identical_reply_share"] == 1.0
    assert out["collapse/repeated_token_share"] == 1.0
    assert out["collapse/rollout_entropy"] == 0.0
    for name in ("entropy_collapse", "identical_replies", "repeated_tokens"):
        assert out[f"alarm/{name}"] == 1.0, name
    assert out["alarm/length_at_cap"] == 0.0  # 64 tokens allowed, far fewer used
    (record,) = caplog.records
    line = record.getMessage()
    assert "\n" not in line and line.startswith("collapse alarm at step 7:")
    assert "entropy collapse" in line and "repeated within their group" in line and "one repeated token" in line


def test_healthy_batch_raises_none(tokenizer, caplog):
    batch = batch_of(tokenizer, lambda g, i, t: HEALTHY_REPLIES[(i + t) % 4], logprob=-1.3)
    watch = CollapseWatch(AlarmConfig(), length_caps={"FrozenLake": 64})
    with caplog.at_level(logging.WARNING, logger="roll.alarms"):
        out = watch.check(batch, {"actor/entropy": 1.1, "env/FrozenLake/action_is_valid": 0.9, "actor/approxkl": 0.001}, step=1)
    assert set(out) >= {f"alarm/{name}" for name in ALARMS}
    assert all(out[f"alarm/{name}"] == 0.0 for name in ALARMS)
    assert out["collapse/identical_reply_share"] == 0.0
    assert out["collapse/rollout_entropy"] == pytest.approx(1.3)
    assert caplog.records == []


def test_replies_cut_at_the_token_cap(tokenizer):
    batch = batch_of(tokenizer, lambda g, i, t: HEALTHY_REPLIES[(i + t) % 4], logprob=-1.0)
    spans = response_spans(batch["response_mask"][0].tolist())
    cap = min(end - start for start, end in spans)  # every reply reaches this many tokens
    out = CollapseWatch(AlarmConfig(), length_caps={"FrozenLake": cap}).check(batch, {}, step=1)
    assert out["collapse/length_at_cap_share"] == 1.0 and out["alarm/length_at_cap"] == 1.0


def test_validity_falling_and_kl_jumping_trip_on_history(tokenizer):
    batch = batch_of(tokenizer, lambda g, i, t: HEALTHY_REPLIES[(i + t) % 4], logprob=-1.0)
    watch = CollapseWatch(AlarmConfig(validity_drop=0.3, kl_jump_factor=5.0, min_kl_jump=0.01))
    for step, (valid, kl) in enumerate([(0.9, 0.004), (0.95, 0.005), (0.9, 0.006)], start=1):
        out = watch.check(batch, {"env/A/action_is_valid": valid, "actor/approxkl": kl}, step)
        assert out["alarm/validity_drop"] == 0.0 and out["alarm/kl_jump"] == 0.0
    out = watch.check(batch, {"env/A/action_is_valid": 0.5, "actor/approxkl": 0.2}, 4)
    assert out["alarm/validity_drop"] == 1.0 and out["alarm/kl_jump"] == 1.0


def test_identical_share_counts_only_groups_of_two_or_more():
    assert identical_reply_share([["a"], ["b"]], ["g0", "g1"]) is None
    assert identical_reply_share([["a", "x"], ["a", "y"], ["b", "z"]], ["g", "g", "g"]) == pytest.approx(2 / 6)


def test_bad_thresholds_are_config_errors():
    with pytest.raises(ConfigError, match="max_identical_reply_share"):
        AlarmConfig(max_identical_reply_share=1.5)
    with pytest.raises(ConfigError, match="kl_jump_factor"):
        AlarmConfig(kl_jump_factor=0.5)


def test_step_wise_samples_count_each_episode_once(tokenizer):
    """A step-wise episode is one sample per turn, each carrying the episode's whole action list: four
    episodes of one group with all-different replies repeat nothing, however many turns they had."""
    samples = []
    for i in range(4):
        replies = [HEALTHY_REPLIES[(i + t) % 4] for t in range(3)]
        for turn in range(3):
            step = trajectory(tokenizer, replies[turn:turn + 1], -1.3, "g0")
            step.actions, step.traj_id, step.step_index = replies, f"g0-{i}", turn
            samples.append(step)
    out = CollapseWatch(AlarmConfig(), length_caps={"FrozenLake": 64}).check(
        trajectories_to_batch(samples, tokenizer.pad_token_id), {"actor/entropy": 1.0}, step=1)
    assert out["collapse/identical_reply_share"] == 0.0
    assert out["alarm/identical_replies"] == 0.0
