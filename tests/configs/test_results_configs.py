"""The configs docs/results.md reproduces its results from are the runs' commands baked in: loading one
gives the same resolved config as the base config with the run's command-line overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from roll.launch.loader import load_agentic_config

CPU_DIR = Path(__file__).resolve().parents[2] / "examples" / "smollm2-135M-agentic_cpu"

# Run fl44 (0.844 before step 17 on the 64 validation maps), as launched by benchmarks/learning_frozen_lake.py.
FL44_OVERRIDES = [
    "max_steps=24", "eval_steps=2", "report.trajectories_per_step=32", "report.val_trajectories=64",
    "actor_train.model_args.disable_gradient_checkpointing=true", "entropy_floor=0.1", "entropy_floor_coef=20.0",
    "custom_envs.FrozenLakeHolesCPU.env_config.random_start=true", "whiten_advantages=true",
    "cap_idle_turn_advantage=true", "actor_train.training_args.warmup_steps=10",
]


def resolved(name: str, overrides: list[str]) -> dict:
    config = load_agentic_config(CPU_DIR, name, overrides=["pretrain=tiny-random-qwen2", "exp_name=same", *overrides])
    return dataclasses.asdict(config)


def differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(a) | set(b))
    out = []
    for key in keys:
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            out += differences(left, right, f"{prefix}{key}.")
        elif left != right:
            out.append(f"{prefix}{key}: {left!r} != {right!r}")
    return out


def test_board_config_is_fl44s_command():
    board = resolved("agent_val_frozen_lake_board", [])
    fl44 = resolved("agent_val_frozen_lake_memoryless", FL44_OVERRIDES)
    assert differences(board, fl44) == []
    assert board["entropy_floor"] == 0.1 and board["custom_envs"]["FrozenLakeHolesCPU"]["env_config"]["random_start"] is True
