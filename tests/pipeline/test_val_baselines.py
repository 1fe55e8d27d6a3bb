"""Validation baselines are measured on the validation batch's own maps (tags and seeds)."""

from __future__ import annotations

from roll.data.batch import Batch
from roll.pipeline.agentic.agentic_config import CustomEnvConfig
from roll.pipeline.agentic.val_baselines import ValidationBaselines, agent_success_by_map


def val_batch(rows: list[tuple[str, int, float]]) -> Batch:
    return Batch(meta={"tag": [r[0] for r in rows], "env_seed": [r[1] for r in rows],
                       "env_metrics": [{"success": r[2], "action_is_valid": 1.0} for r in rows]})


ENVS = {
    # Right x3 falls into the hole; the only sequences that win go down first
    "Lake": CustomEnvConfig(env_type="frozen_lake", max_steps=10,
                            env_config={"desc": ["SFFH", "FFFF", "FFFF", "FFFG"], "is_slippery": False}),
    "Short": CustomEnvConfig(env_type="frozen_lake", max_steps=3, env_config={"size": 4, "is_slippery": False}),
    "Slippery": CustomEnvConfig(env_type="frozen_lake", env_config={"is_slippery": True}),
    "Count": CustomEnvConfig(env_type="countdown"),
}


def test_agent_success_is_averaged_per_map():
    batch = val_batch([("Lake", 1, 1.0), ("Lake", 1, 0.0), ("Lake", 2, 1.0), ("Short", 1, 0.0)])
    assert agent_success_by_map(batch) == {"Lake": {1: 0.5, 2: 1.0}, "Short": {1: 0.0}}


def test_metrics_per_supported_tag_and_cache():
    baselines = ValidationBaselines(ENVS)
    batch = val_batch([("Lake", 5, 1.0), ("Short", 7, 0.0), ("Short", 8, 0.0), ("Slippery", 1, 1.0), ("Count", 3, 0.0)])
    metrics = baselines.metrics(batch)
    # one fixed map: some sequence solves it, so the agent's win is not beyond the sequence
    assert metrics["val/blind/Lake/fixed_sequence"] == 1.0
    assert metrics["val/blind/Lake/best"] == 1.0
    assert metrics["val/blind/Lake/agent_solved_beyond_sequence"] == 0.0
    assert metrics["val/blind/Lake/agent_solved_by_one_sequence"] == 1.0
    assert metrics["val/blind/Short/agent_solved_by_one_sequence"] == 0.0  # it solved nothing
    # the goal of a 4x4 map is 6 moves away: nothing reaches it in 3 moves
    assert metrics["val/blind/Short/best"] == 0.0 and metrics["val/blind/Short/uniform_random"] == 0.0
    assert not any("Slippery" in k or "Count" in k for k in metrics)
    assert not any(k.endswith("/success") for k in metrics)  # keeps val_success averages to the agent's
    assert set(baselines.cache) == {("Lake", (5,)), ("Short", (7, 8))}
    baselines.metrics(batch)
    assert len(baselines.cache) == 2
