"""Scripted policies: random ones always give legal answers; optimal ones reach each env's ceiling."""

import random

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.parsing import THINK_ACTION_PATTERN
from roll.agentic.env.policies import run_scripted_episode, scripted_action

CEILING_CASES = [
    ("frozen_lake", {"is_slippery": False, "size": 6, "max_steps": 40}),
    ("sokoban", {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 10}),
    ("sokoban", {"dim_room": [8, 8], "num_boxes": 2, "max_steps": 15}),
    ("countdown", {}),
    ("guess_number", {}),
]


@pytest.mark.parametrize("env_type, config", CEILING_CASES)
def test_optimal_policy_solves_every_episode(env_type, config):
    env = make_env(env_type, **config)
    for seed in range(60):
        episode = run_scripted_episode(env, seed, "optimal")
        assert episode.success and episode.terminated and not episode.truncated, (env_type, seed)
        if env_type == "sokoban":
            assert episode.num_turns == env.optimal_moves


@pytest.mark.parametrize("env_type, config", CEILING_CASES)
def test_random_policy_is_always_valid_and_worse_than_optimal(env_type, config):
    env = make_env(env_type, **config)
    successes = 0
    for seed in range(60):
        episode = run_scripted_episode(env, seed, "random", random.Random(seed))
        env.reset(seed=seed)
        for turn in episode.turns:
            _, _, terminated, truncated, info = env.step(turn["action"])
            assert info["metrics"]["action_is_valid"] == 1.0
            if terminated or truncated:
                break
        successes += episode.success
    assert successes < 60


def test_think_pattern_gets_think_and_answer_text():
    env = make_env("frozen_lake", is_slippery=False, action_pattern=THINK_ACTION_PATTERN)
    env.reset(seed=0)
    text = scripted_action(env, "optimal", think="the goal is down-right")
    assert text.startswith("<think>the goal is down-right</think>")
    info = env.step(text)[4]
    assert info["think_content"] == "the goal is down-right" and info["metrics"]["action_is_valid"] == 1.0


def test_same_seed_same_scripted_episode():
    env = make_env("frozen_lake", size=5)
    first = run_scripted_episode(env, 9, "random")
    assert run_scripted_episode(env, 9, "random").turns == first.turns


def test_unknown_kind_is_refused():
    env = make_env("sokoban")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="unknown policy kind"):
        scripted_action(env, "greedy")
