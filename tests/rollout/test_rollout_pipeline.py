"""The rollout-only pipeline writes trajectories (JSONL) and a per-tag summary."""

from __future__ import annotations

import json

from roll.configs.worker_config import ModelArgs, WorkerConfig
from roll.configs.agentic_config import AgenticConfig, CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.agentic_rollout_pipeline import AgenticRolloutPipeline

from tests.rollout.helpers import greedy


def test_rollout_pipeline_writes_trajectories_and_summary(ray_session, tiny_model_dir, tmp_path):
    envs = {
        "FrozenLake": CustomEnvConfig(env_type="frozen_lake", max_steps=2, max_tokens_per_step=8,
                                      env_config={"max_steps": 2, "is_slippery": False}),
        "Sokoban": CustomEnvConfig(env_type="sokoban", max_steps=2, max_tokens_per_step=8,
                                   env_config={"max_steps": 2, "dim_room": [6, 6], "num_boxes": 1}),
    }
    config = AgenticConfig(
        custom_envs=envs, output_dir=str(tmp_path), sequence_length=1024, seed=3,
        val_env_manager=EnvManagerConfig(num_env_groups=4, group_size=1, tags=["FrozenLake", "Sokoban"],
                                         num_groups_partition=[2, 2], generating_args=greedy(8)),
        actor_infer=WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
    )
    table = AgenticRolloutPipeline(config).run()
    lines = (tmp_path / "rollouts" / "trajectories.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 4
    assert sorted(r["tag"] for r in records) == ["FrozenLake", "FrozenLake", "Sokoban", "Sokoban"]
    for r in records:
        assert r["messages"][0]["role"] == "system" and r["messages"][-1]["role"] == "assistant"
        assert len(r["actions"]) == len(r["rewards"]) == r["metrics"]["num_actions"] >= 1
        assert abs(sum(r["rewards"]) - r["score"]) < 1e-6
    assert set(table) == {"FrozenLake", "Sokoban"} and table["Sokoban"]["episodes"] == 2
    summary = (tmp_path / "rollouts" / "summary.md").read_text()
    assert "| FrozenLake | 2 |" in summary and "| Sokoban | 2 |" in summary
