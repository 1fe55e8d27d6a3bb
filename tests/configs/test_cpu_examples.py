"""Every config of the CPU example folder loads and passes validation; the Sokoban one is ROLL's
SimpleSokoban (6x6 room, one box, 10 moves) drawn one token per cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from roll.agentic.env import make_env
from roll.pipeline.agentic.agentic_config import load_agentic_config

CPU_DIR = Path(__file__).resolve().parents[2] / "examples" / "smollm2-135M-agentic_cpu"


@pytest.mark.parametrize("name", sorted(p.stem for p in CPU_DIR.glob("*.yaml")))
def test_cpu_example_config_loads(name):
    config = load_agentic_config(CPU_DIR, name, overrides=["pretrain=tiny-random-qwen2"])
    assert config.train_env_manager.tags and set(config.train_env_manager.tags) <= set(config.custom_envs)


def test_sokoban_example_is_simple_sokoban_with_spaced_cells():
    config = load_agentic_config(CPU_DIR, "agent_val_sokoban", overrides=["pretrain=tiny-random-qwen2"])
    assert config.train_env_manager.tags == ["SokobanCPU"] == config.val_env_manager.tags
    spec = config.custom_envs["SokobanCPU"]
    env = make_env(spec.env_type, **spec.env_config)
    rows = env.reset(seed=0)[0].split("\n")
    assert len(rows) == 6 and all(len(row.split(" ")) == 6 for row in rows)
    assert sum(row.split(" ").count("X") for row in rows) == 1  # one box, off its target at the start
    assert env.optimal_moves <= spec.max_steps == 10


def test_sokoban_example_rewards_a_reply_with_no_move_below_any_move():
    """A reply with no move must cost more than any move, a move into a wall included: otherwise RL
    learns to write nonsense instead of moving (it did, with a wall move at -0.2 and no move at -0.15)."""
    config = load_agentic_config(CPU_DIR, "agent_val_sokoban", overrides=["pretrain=tiny-random-qwen2"])
    spec = config.custom_envs["SokobanCPU"]
    rewards = {}
    for seed in range(20):
        for move in ("Up", "Down", "Left", "Right", "Jump"):
            env = make_env(spec.env_type, **spec.env_config)
            env.reset(seed=seed)
            _, reward, _, _, info = env.step(f"<answer>{move}</answer>")
            kind = "no move" if not info["metrics"]["action_is_valid"] else (
                "into a wall" if not info["metrics"]["action_is_effective"] else "effective")
            rewards.setdefault(kind, set()).add(reward)
    assert set(rewards) == {"no move", "into a wall", "effective"}, rewards
    assert max(rewards["no move"]) < min(rewards["into a wall"] | rewards["effective"]), rewards
