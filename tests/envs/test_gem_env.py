"""The GEM adapter: GEM's games and a reasoning-gym task through roll's env contract, a rollout with
a tiny model, hostile model output, and seeds isolated from GEM's global RNG seeding."""

from __future__ import annotations

import copy
import random
import re
import sys

import numpy as np
import pytest

from roll.agentic.env import make_env
from tests.conftest import roll_examples
from tests.envs.test_fuzz import hostile_outputs

pytest.importorskip("gem", reason="GEM is an optional dependency: pip install 'roll[gem]' (scripts/bootstrap.sh installs it)")

PENALTY = -0.25
GAMES = {
    "guess": ("game:GuessTheNumber-v0", {"min_number": 1, "max_number": 20, "max_turns": 10}),  # ROLL's id and kwargs
    "hanoi": ("game:TowerofHanoi-v0-easy", {}),
    "rg": ("rg:leg_counting", {"size": 50, "seed": 3}),
}


def hanoi_moves(n: int, source: str = "A", target: str = "C", spare: str = "B") -> list[str]:
    if n == 0:
        return []
    return hanoi_moves(n - 1, source, spare, target) + [f"{source} {target}"] + hanoi_moves(n - 1, spare, target, source)


def test_guess_the_number_binary_search_wins():
    env = make_env("gem", gem_id=GAMES["guess"][0], gem_kwargs=GAMES["guess"][1], max_steps=10)
    observation, info = env.reset(seed=4)
    assert "Guess The Number" in observation and "between 1 and 20" in observation and "Enter your next guess" in observation
    low, high = 1, 20
    for _ in range(10):
        guess = (low + high) // 2
        observation, reward, terminated, truncated, info = env.step(f"I guess \\boxed{{{guess}}}")
        assert info["metrics"]["action_is_valid"] == 1.0 and set(info["metrics_agg_mode"]) == set(info["metrics"])
        if terminated:
            break
        if f"higher than {guess}" in observation:
            low = guess + 1
        else:
            assert f"lower than {guess}" in observation, observation
            high = guess - 1
    assert terminated and reward == 1.0 and info["metrics"]["success"] == 1.0


def test_tower_of_hanoi_solution_wins_and_an_illegal_move_does_not():
    env = make_env("gem", gem_id=GAMES["hanoi"][0])
    observation, _ = env.reset(seed=0)
    assert "Tower of Hanoi with 3 disks" in observation and "A: [3, 2, 1]" in observation
    observation, reward, terminated, _, info = env.step("\\boxed{A B}")
    observation, reward, terminated, _, info = env.step("\\boxed{A B}")  # 2 onto 1: illegal
    assert "larger" in observation and not terminated and info["metrics"]["success"] == 0.0
    env.reset(seed=0)
    for move in hanoi_moves(3):
        observation, reward, terminated, truncated, info = env.step(f"<think>plan</think> \\boxed{{{move}}}")
    assert terminated and info["metrics"]["success"] == 1.0 and reward == 1.0


def test_reasoning_gym_task_scores_the_boxed_answer():
    env = make_env("gem", gem_id=GAMES["rg"][0], gem_kwargs=GAMES["rg"][1], max_steps=1)
    observation, _ = env.reset(seed=7)
    assert "legs" in observation
    answer = env.gem_env.data["answer"]
    _, reward, terminated, _, info = env.step(f"The total is \\boxed{{{answer}}}")
    assert terminated and reward == 1.0 and info["metrics"]["success"] == 1.0
    env.reset(seed=7)
    _, reward, terminated, _, info = env.step(f"\\boxed{{{int(answer) + 1}}}")
    assert terminated and reward == 0.0 and info["metrics"]["success"] == 0.0
    env.reset(seed=7)
    _, reward, terminated, truncated, info = env.step(f"<answer>{answer}</answer>")  # roll's convention is not GEM's
    assert reward == 0.0 and info["metrics"]["action_is_valid"] == 0.0 and truncated


def play(env, seed: int, moves: list[str], disturb: bool) -> list[tuple]:
    out = [env.reset(seed=seed)[0]]
    for move in moves:
        if disturb:  # another user of the global RNGs between our calls
            random.seed(999)
            np.random.seed(999)
        out.append(env.step(move)[:4])
    return out


@pytest.mark.parametrize("game", ["guess", "hanoi"])
def test_same_seed_same_episode_and_envs_in_one_process_do_not_interfere(game):
    gem_id, kwargs = GAMES[game]
    moves = ["\\boxed{10}", "\\boxed{15}", "\\boxed{5}"] if game == "guess" else ["\\boxed{A C}", "\\boxed{A B}", "\\boxed{C B}"]
    reference = play(make_env("gem", gem_id=gem_id, gem_kwargs=kwargs), 11, moves, disturb=False)
    a, b = make_env("gem", gem_id=gem_id, gem_kwargs=kwargs), make_env("gem", gem_id=gem_id, gem_kwargs=kwargs)
    b.reset(seed=12)
    random.seed(5)
    caller_state = random.getstate()
    a.reset(seed=11)
    assert random.getstate() == caller_state  # GEM's seeding did not touch the caller's RNG
    # interleave b's episode with a's replay: a still plays exactly the reference episode
    replay = [a.reset(seed=11)[0]]
    for move in moves:
        b.step(b.random_answer(random.Random(1)))
        replay.append(a.step(move)[:4])
    assert replay == reference == play(a, 11, moves, disturb=True)
    if game == "guess":
        secrets = set()
        for seed in range(8):
            a.reset(seed=seed)
            secrets.add(a.gem_env.game_number)
        assert len(secrets) > 2  # different seeds, different games


def plain_state(env) -> dict:
    """The GEM env's plain-data attributes (its game state)."""
    kinds = (int, float, str, bool, list, dict, tuple, set, type(None))
    return copy.deepcopy({k: v for k, v in vars(env.gem_env).items() if isinstance(v, kinds)})


@pytest.mark.parametrize("game", sorted(GAMES))
def test_hostile_outputs_never_raise_and_unboxed_ones_change_nothing(game):
    gem_id, kwargs = GAMES[game]
    env = make_env("gem", gem_id=gem_id, gem_kwargs=kwargs, format_penalty=PENALTY, max_steps=10_000)
    rng = random.Random(game)
    cases = [text for text, _ in hostile_outputs(rng, None, think_first=False)]
    cases += ["\\boxed{}", "\\boxed{" * 2000, "\\boxed{\\boxed{1}}", "\\boxed{" + "9" * 10_000 + "}", "\\boxed{-1}",
              "\\boxed{A Z}", "\\boxed{C A B}", "\\boxed{0}", "\\boxed{1e400}", "\\boxed{NaN}", "\\boxed{\x00}", "\\boxed{🐸}"]
    rng.shuffle(cases)
    env.reset(seed=0)
    invalid = 0
    for text in cases:
        before_obs, before = env.render(), plain_state(env)
        obs, reward, terminated, truncated, info = env.step(text)
        assert set(info["metrics_agg_mode"]) == set(info["metrics"]) and isinstance(obs, str)
        if "\\boxed{" not in text or re.search(r"\\boxed\{.+\}", text, re.DOTALL) is None:
            invalid += 1
            assert info["metrics"]["action_is_valid"] == 0.0 and reward == PENALTY and not terminated
            assert obs == before_obs and plain_state(env) == before, text[:80]
        if terminated or truncated:
            env.reset(seed=env.seed + 1)
    assert invalid > 30


def test_missing_gem_is_refused_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gem", None)  # what `import gem` does when GEM is not installed
    with pytest.raises(ImportError, match=r"roll\[gem\]"):
        make_env("gem", gem_id="game:TowerofHanoi-v0-easy")


@pytest.mark.parametrize("config, message", [
    ({"gem_id": "TowerofHanoi"}, "expected a GEM env id"),
    ({"gem_id": "game:NoSuchGame-v0"}, "is not a GEM env id"),
    ({"gem_id": "rg:leg_counting", "gem_kwargs": [1]}, "gem_kwargs"),
])
def test_bad_gem_configs_fail_with_a_clear_message(config, message):
    with pytest.raises(ValueError, match=message):
        make_env("gem", **config)


def test_the_example_entries_build_and_take_a_boxed_move():
    from omegaconf import OmegaConf

    entries = OmegaConf.to_container(OmegaConf.load("examples/config/envs.yaml"), resolve=True)["custom_env"]
    for tag in ("GemGuessTheNumber", "GemTowerofHanoi", "GemLegCounting"):
        entry = entries[tag]
        env = make_env(entry["env_type"], **entry["env_config"])
        assert env.config.max_steps == entry["max_steps"]
        observation, _ = env.reset(seed=1)
        assert "boxed" in entry["agent_template"].format(turn_idx=1, observation=observation, actions_left=1, max_response_length=1)
        _, _, _, _, info = env.step("\\boxed{A C}" if "Hanoi" in tag else "\\boxed{4}")
        assert info["metrics"]["action_is_valid"] == 1.0, tag


def test_rolls_gem_entries_build_and_play_with_their_own_env_types():
    from omegaconf import OmegaConf

    entries = {}
    for name, group in (("traj_envs_gem_games.yaml", "gem_games"), ("traj_envs_gem_rg.yaml", "gem_rg")):
        entries.update(OmegaConf.to_container(OmegaConf.load(roll_examples("config", name)), resolve=True)[group])
    for tag in ("GuessTheNumber", "TowerofHanoi", "LetterCounting"):
        entry = entries[tag]
        env = make_env(entry["env_type"], **entry["env_config"])  # e.g. game:TowerofHanoi-v0 with num_disks: 4
        observation, _ = env.reset(seed=0)
        _, _, _, _, info = env.step("\\boxed{A C}" if "Hanoi" in tag else "\\boxed{3}")
        assert info["metrics"]["action_is_valid"] == 1.0, tag
    assert "4 disks" in make_env("game:TowerofHanoi-v0", num_disks=4).reset(seed=0)[0]
    with pytest.raises(ValueError, match="Did you mean 'num_disks'"):
        make_env("game:TowerofHanoi-v0", num_disk=4)
