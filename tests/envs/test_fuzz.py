"""Hostile model outputs: no env ever raises; invalid text costs the format penalty, leaves the game
state untouched, and is counted in action_is_valid."""

import copy
import time
import random

import pytest

from roll.agentic.env import make_env

PENALTY = -0.25
THINK = r"<think>(.*?)</think>\s*<answer>(.*?)</answer>"
ENVS = {
    "frozen_lake": ({"is_slippery": True, "size": 5}, "Down"),
    "frozen_lake_think": ({"is_slippery": False, "action_pattern": THINK}, "Down"),
    "sokoban": ({"dim_room": [6, 6], "num_boxes": 1}, "Left"),
    "countdown": ({}, None),  # a valid answer ends the episode; see below
    "guess_number": ({}, "50"),
}


def hostile_outputs(rng: random.Random, valid_answer: str, think_first: bool) -> list[tuple[str, bool]]:
    """(text, expected to be a valid action). Valid only where the text holds exactly one
    well-formed answer for the env; everything else must be rejected."""
    fixed_invalid = [
        "", " ", "\n\t", "<answer></answer>", "<answer>   </answer>", "answer: Left", "<answer>Left",
        "Left</answer>", "<ANSWER>Left</ANSWER>", "<answer><answer>Left</answer></answer>",
        "<answer>Left</answer><answer>Left</answer>", "<answer>Left</answer> then <answer>Up</answer>",
        "<answer>__import__('os').system('echo hi')</answer>", "<answer>eval('1+1')</answer>",
        "<answer>exec(\"import os\")</answer>", "<answer>${jndi:ldap://x}</answer>", "<answer>'; DROP TABLE</answer>",
        "<answer>Left; Right</answer>", "<answer>Left Right</answer>", "<answer>\u202eLeft</answer>",
        "<answer>Ｌｅｆｔ</answer>", "<answer>Lеft</answer>",  # full-width and Cyrillic е
        "<answer>" + "9" * 10_000 + "</answer>", "x" * 10_000, "<answer>" * 2_000,
        "<answer>" + "(" * 5_000 + "1" + ")" * 5_000 + "</answer>", "\x00\x01\x02", "🐸" * 500,
        "<think>" * 1_000 + "</think>", "<|im_end|>", "<answer><|im_end|></answer>",
        "<answer>1e400</answer>", "<answer>NaN</answer>", "<answer>-0</answer>", "<answer>1/0</answer>",
        "<answer>" + "1+" * 5_000 + "1</answer>", "<think>a</think> <answer>b" * 400,
    ]
    cases = [(text, False) for text in fixed_invalid]
    if valid_answer is not None:
        mixed = "".join(ch.upper() if rng.random() < 0.5 else ch.lower() for ch in valid_answer)
        think = "<think>I see the map.</think>\n" if think_first else ""
        cases += [
            (f"{think}<answer>{valid_answer}</answer>", True),
            (f"{think}<answer>  {mixed}\n</answer><|im_end|>", True),
            (f"I think {'so ' * 3000}{think}<answer>{mixed}</answer><|eot_id|>", True),
        ]
        if think_first:  # the think pattern requires the think part
            cases.append((f"<answer>{valid_answer}</answer>", False))
    alphabet = "<>/answerthink()+-*ÿ漢 \n\t|_LeftUp0123456789'\"\\"
    for _ in range(1_200):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        cases.append((body, None))  # random junk: validity decided by the env, but it must not raise
    return cases


def snapshot(env) -> dict:
    """Everything the env holds except the turn counter (invalid turns still count as turns)."""
    state = {}
    for key, value in vars(env).items():
        if key == "num_turns":
            continue
        state[key] = value.getstate() if isinstance(value, random.Random) else copy.deepcopy(value)
    return state


@pytest.mark.parametrize("env_type", sorted(ENVS))
def test_hostile_outputs_never_raise_and_invalid_ones_change_nothing(env_type):
    config, valid_answer = ENVS[env_type]
    env = make_env(env_type.replace("_think", ""), format_penalty=PENALTY, max_steps=10_000, **config)
    rng = random.Random(env_type)
    cases = hostile_outputs(rng, valid_answer, think_first="action_pattern" in config)
    rng.shuffle(cases)
    seed = 0
    env.reset(seed=seed)
    counted_invalid = expected_invalid = 0
    for text, expect_valid in cases:
        before_obs, before = env.render(), snapshot(env)
        obs, reward, terminated, truncated, info = env.step(text)
        valid = info["metrics"]["action_is_valid"]
        assert valid in (0.0, 1.0) and set(info["metrics_agg_mode"]) == set(info["metrics"])
        if expect_valid is not None:
            assert valid == float(expect_valid), (env_type, text[:80], info["invalid_reason"])
        if valid == 0.0:
            counted_invalid += 1
            expected_invalid += expect_valid is False
            assert reward == PENALTY and not terminated and not truncated
            assert obs == before_obs and snapshot(env) == before, text[:80]
            assert info["action"] is None and isinstance(info["invalid_reason"], str)
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    assert counted_invalid >= expected_invalid > 30


def test_countdown_rejects_code_and_malformed_expressions_but_accepts_arithmetic():
    env = make_env("countdown", format_penalty=PENALTY, max_steps=1_000)
    env.reset(seed=1)
    for text in ("<answer>__import__('os')</answer>", "<answer>2 ** 10</answer>", "<answer>(1 + 2</answer>",
                 "<answer>1 +</answer>", "<answer>-3 + 4</answer>", "<answer>3 / (2 - 2)</answer>",
                 "<answer>lambda: 1</answer>", "<answer>1.5 + 2</answer>", "<answer>3 = 4 = 5</answer>"):
        _, reward, terminated, _, info = env.step(text)
        assert (reward, terminated, info["metrics"]["action_is_valid"]) == (PENALTY, False, 0.0), text
    _, _, terminated, _, info = env.step("<answer>(1 + 2) * 3 = 9</answer>")
    assert terminated and info["metrics"]["action_is_valid"] == 1.0


def test_text_that_makes_the_think_pattern_backtrack_is_rejected_quickly():
    # With the stdlib `re` this text takes seconds (cubic backtracking); the parser bounds it.
    env = make_env("frozen_lake", action_pattern=THINK, format_penalty=PENALTY, max_steps=100)
    env.reset(seed=0)
    for text in ("<think>a</think>  <answer>b" * 400, "<think>x</think><answer>" * 400):
        start = time.perf_counter()
        _, reward, _, _, info = env.step(text)
        assert time.perf_counter() - start < 1.0
        assert reward == PENALTY and info["metrics"]["action_is_valid"] == 0.0
