"""Validation baselines are measured on the validation batch's own maps (tags and seeds)."""

from __future__ import annotations

from roll.data.batch import Batch
from roll.configs.agentic_config import CustomEnvConfig
from roll.pipeline.agentic.val_baselines import ValidationBaselines, agent_success_by_map


def val_batch(rows: list[tuple], step_rows: bool = False) -> Batch:
    """Rows of (tag, seed, success[, replies]); with step_rows, each episode as one row per reply
    (a step-wise env manager's samples), all carrying the episode's replies."""
    episodes = [(f"e{i}", *row, *([[]] if len(row) == 3 else [])) for i, row in enumerate(rows)]
    if step_rows:
        episodes = [(*episode, turn) for episode in episodes for turn in range(max(1, len(episode[4])))]
    meta = {"traj_id": [e[0] for e in episodes], "tag": [e[1] for e in episodes],
            "env_seed": [e[2] for e in episodes], "actions": [e[4] for e in episodes],
            "env_metrics": [{"success": e[3], "action_is_valid": 1.0} for e in episodes]}
    meta["step_index"] = [e[5] for e in episodes] if step_rows else [None] * len(episodes)
    return Batch(meta=meta)


ENVS = {
    # Right x3 falls into the hole; the only sequences that win go down first
    "Lake": CustomEnvConfig(env_type="frozen_lake", max_steps=10,
                            env_config={"desc": ["SFFH", "FFFF", "FFFF", "FFFG"], "is_slippery": False}),
    "Short": CustomEnvConfig(env_type="frozen_lake", max_steps=3, env_config={"size": 4, "is_slippery": False}),
    "Slippery": CustomEnvConfig(env_type="frozen_lake", env_config={"is_slippery": True}),
    "Count": CustomEnvConfig(env_type="countdown"),
    # an agent runner's tag (ProxyEnvManager): the agent plays its own game, roll has no env to replay
    "Agent": CustomEnvConfig(env_type=None, env_manager_cls="roll.pipeline.agentic.env_manager.proxy_env_manager.ProxyEnvManager",
                             agent_runner_cls="examples.agents.grid_agent.GridAgent"),
}


def test_agent_success_is_averaged_per_map():
    rows = [("Lake", 1, 1.0, ["a", "b", "c"]), ("Lake", 1, 0.0, ["a"]), ("Lake", 2, 1.0), ("Short", 1, 0.0)]
    for step_rows in (False, True):  # a step-wise episode counts once, however many turns it had
        assert agent_success_by_map(val_batch(rows, step_rows)) == {"Lake": {1: 0.5, 2: 1.0}, "Short": {1: 0.0}}


def test_metrics_per_supported_tag_and_cache():
    baselines = ValidationBaselines(ENVS)
    batch = val_batch([("Lake", 5, 1.0), ("Short", 7, 0.0), ("Short", 8, 0.0), ("Slippery", 1, 1.0), ("Count", 3, 0.0),
                      ("Agent", 4, 1.0)])
    metrics = baselines.metrics(batch)
    # one fixed map: some sequence solves it, so the agent's win is not beyond the sequence
    assert metrics["val/blind/Lake/fixed_sequence"] == 1.0
    assert metrics["val/blind/Lake/best"] == 1.0
    assert metrics["val/blind/Lake/agent_solved_beyond_sequence"] == 0.0
    assert metrics["val/blind/Lake/agent_solved_by_one_sequence"] == 1.0
    assert metrics["val/blind/Short/agent_solved_by_one_sequence"] == 0.0  # it solved nothing
    # the goal of a 4x4 map is 6 moves away: nothing reaches it in 3 moves
    assert metrics["val/blind/Short/best"] == 0.0 and metrics["val/blind/Short/uniform_random"] == 0.0
    assert metrics["val/blind/Lake/maps"] == 1.0 and metrics["val/blind/Short/maps"] == 2.0
    assert not any("Slippery" in k or "Count" in k or "Agent" in k for k in metrics)
    assert not any(k.endswith("/success") for k in metrics)  # keeps val_success averages to the agent's
    assert set(baselines.cache) == {("Lake", (5,)), ("Short", (7, 8))}
    baselines.metrics(batch)
    assert len(baselines.cache) == 2


def reply(move: str) -> str:
    return f"<answer>{move}</answer>"


def test_losing_moves_against_the_agents_own_move_mix():
    """On Lake's map (hole at the top right) the only decision point of these episodes is the cell left
    of the hole, where Right loses and the other moves keep the goal in reach."""
    into_hole = [reply(m) for m in ("Right", "Right", "Right")]
    around = [reply(m) for m in ("Right", "Right", "Down", "Down", "Down", "Right")]
    rows = [("Lake", 5, 0.0, into_hole), ("Lake", 5, 1.0, around)]
    for step_rows in (False, True):
        metrics = ValidationBaselines(ENVS).metrics(val_batch(rows, step_rows=step_rows))
        assert metrics["val/blind/Lake/agent_losing_moves"] == 0.5  # one of the two decisions went in
        # 6 of its 9 moves are Right, the one losing move at both decision points
        assert metrics["val/blind/Lake/losing_moves_by_move_mix"] == 6 / 9
        assert metrics["val/blind/Lake/fixed_sequence"] == 1.0
