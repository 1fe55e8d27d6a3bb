"""The report's replay of an agent runner's episode: the agent played its own game, so there is no roll
env to replay; the episode keeps its replies and rewards, with a note saying why, and no warning."""

from __future__ import annotations

import logging

from roll.launch.loader import load_agentic_config
from roll.viewer.records import TrajectoryRecorder


def test_an_agent_runners_episode_is_shown_without_a_replay(tiny_model_dir, caplog):
    config = load_agentic_config("examples/agents", "agent_grid", [f"pretrain={tiny_model_dir}"])
    row = {"tag": "GridAgent", "env_seed": 3, "actions": ["<tool_call>a</tool_call>", "<tool_call>b</tool_call>"],
           "step_rewards": [0.0, 1.0]}
    with caplog.at_level(logging.WARNING):
        turns, note = TrajectoryRecorder(config).replay(row, "val")
    assert turns == [{"reply": "<tool_call>a</tool_call>", "reward": 0.0}, {"reply": "<tool_call>b</tool_call>", "reward": 1.0}]
    assert note == "played by the agent runner examples.agents.grid_agent.GridAgent: no roll env to replay the boards with"
    assert not caplog.records
