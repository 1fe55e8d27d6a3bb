"""ProxyEnvManager with real agent runners: the bundled GEM and tool-call runners and one written with
the OpenAI Agents SDK play whole episodes against tiny models; the recorded samples are exact and
train a step; runners that raise, hang, forge or stay silent fail or report as they should."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from roll.configs.agentic_config import CustomEnvConfig
from roll.pipeline.agentic.env_manager.proxy_env_manager import ProxyEnvManager
from roll.pipeline.agentic.llm_proxy import PolicyProxy
from roll.pipeline.agentic.trajectory import EpisodeFailure
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.strategies.hf_infer import HFInferStrategy
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.proxy_agents.runners import HangingRunner
from tests.proxy_agents.helpers import ScriptedPolicy, assert_trajectory_is_exact, load_with_tool_template, tool_call_text
from tests.rollout.helpers import greedy, manager_config
from tests.workers.helpers import actor_config

RUNNERS = "roll.pipeline.agentic.agent_runner"
SOKOBAN = CustomEnvConfig(env_type="sokoban", max_steps=4, max_tokens_per_step=48,
                          env_config={"dim_room": [6, 6], "num_boxes": 1, "max_steps": 4},
                          env_manager_cls="roll.pipeline.agentic.env_manager.proxy_env_manager.ProxyEnvManager")


def spec(runner: str) -> CustomEnvConfig:
    return dataclasses.replace(SOKOBAN, agent_runner_cls=runner)


def manager(runner: str, tokenizer, engine, env_id: int = 0, **config) -> ProxyEnvManager:
    sampling = dataclasses.replace(greedy(48), do_sample=True, temperature=1.0)
    return ProxyEnvManager("SimpleSokoban", spec(runner), manager_config(sampling, **config), tokenizer,
                           PolicyProxy([engine]), sequence_length=2048, env_id=env_id)


def test_gem_runner_plays_roll_envs_through_chat_as_one_exact_sample(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    _, model = load_with_tool_template(tiny_model_dir, "qwen2")
    try:
        runner = manager(f"{RUNNERS}.gem_runner.GEMRunner", strategy.tokenizer, strategy)
        trajs = [runner.run_episode(seed, f"ep{seed}") for seed in (1, 2)]
    finally:
        strategy.shutdown()
    for (traj,) in trajs:
        turns = int(traj.env_metrics["num_actions"])
        assert traj.env_metrics["agent/calls"] == turns >= 1 and traj.env_metrics["agent/unattributed_calls"] == 0
        assert traj.score == pytest.approx(sum(traj.step_rewards)) and len(traj.step_rewards) == turns
        assert_trajectory_is_exact(model, traj)
        assert len(traj.input_ids) <= 2048


def test_tool_call_runner_plays_moves_as_tool_calls(tiny_model_dir):
    tokenizer, model = load_with_tool_template(tiny_model_dir, "qwen2")
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text("qwen2", d) for d in ("Up", "Left", "Down", "Right")])
    (traj,) = manager(f"{RUNNERS}.tool_call_runner.ToolCallRunner", tokenizer, policy).run_episode(3)
    assert traj.env_metrics["num_actions"] == 4 and traj.env_metrics["agent/calls"] == 4
    assert traj.env_metrics["action_is_valid"] == 1.0  # every tool call was a legal move
    assert [m["role"] for m in traj.messages].count("tool") == 3  # the last move's answer was never sent
    assert_trajectory_is_exact(model, traj)


def test_an_agents_sdk_runner_plays_whole_episodes_and_its_samples_train_a_step(tiny_model_dir):
    tokenizer, model = load_with_tool_template(tiny_model_dir, "qwen2")
    moves = ["Up", "Left", "Down", "Right", "Up", "Down"]
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text("qwen2", d) for d in moves] * 4)
    managers = [manager("tests.proxy_agents.runners.SDKSokobanRunner", tokenizer, policy, env_id=i) for i in range(2)]
    trajs = []
    for group, seed in enumerate((5, 6)):
        for member in managers:
            (traj,) = member.run_episode(seed, f"g{group}")
            traj.traj_group_id, traj.traj_id = f"g{group}", f"g{group}-{member.env_id}"
            trajs.append(traj)
    for traj in trajs:
        # the SDK resent the whole history with its tool calls at each turn: one sample per episode
        assert traj.env_metrics["agent/calls"] == 4 and traj.env_metrics["agent/samples"] == 1
        assert sum(traj.response_mask) == traj.generated_tokens > 0
        assert_trajectory_is_exact(model, traj)
    batch = trajectories_to_batch(trajs, tokenizer.pad_token_id)
    scores = batch["scores"]
    group_mean = torch.stack([scores[:2].mean()] * 2 + [scores[2:].mean()] * 2)
    advantages = (scores - group_mean + 0.5)[:, None] * batch["response_mask"].float()  # any non-zero signal
    batch.tensors["advantages"] = advantages
    worker = ActorWorker(actor_config(tiny_model_dir))
    before = {k: v.clone() for k, v in worker.strategy.full_state_dict().items()}
    metrics = worker.train_step(batch, LossConfig(ppo_epochs=1, mini_batch_size=len(batch)))
    after = worker.strategy.full_state_dict()
    assert torch.isfinite(torch.tensor(metrics["actor/pg_loss"]))
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("runner,kind,detail", [
    ("tests.proxy_agents.runners.RaisingRunner", "env_error", "RuntimeError: the agent crashed"),
    ("tests.proxy_agents.runners.ForgingRunner", "episode_error", "1 unattributed"),
    ("tests.proxy_agents.runners.SilentRunner", "episode_error", "0 calls"),
])
def test_a_runner_that_fails_fails_its_episode(tiny_model_dir, runner, kind, detail):
    strategy = HFInferStrategy(tiny_model_dir)
    try:
        with pytest.raises(EpisodeFailure) as err:
            manager(runner, strategy.tokenizer, strategy).run_episode(1)
    finally:
        strategy.shutdown()
    assert err.value.kind == kind and detail in err.value.detail


def test_a_runner_that_hangs_times_out_and_is_counted(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    hung = manager("tests.proxy_agents.runners.HangingRunner", strategy.tokenizer, strategy, env_timeout_s=0.2)
    try:
        with pytest.raises(EpisodeFailure) as err:
            hung.run_episode(1)
        assert err.value.kind == "env_timeout" and hung.hung_env_calls() == 1
    finally:
        HangingRunner.release.set()
        strategy.shutdown()


def test_the_example_agent_trains_on_what_it_played(tiny_model_dir):
    """examples/agents/grid_agent.py (no roll imports) under the manager: a policy that walks to the goal
    scores 1 in one exact sample; the random tiny model, which writes no tool call, stays where it started."""
    tokenizer, model = load_with_tool_template(tiny_model_dir, "qwen2")
    seed = 4
    me, goal = random.Random(seed).sample([(r, c) for r in range(4) for c in range(4)], 2)
    path = ["Down" if goal[0] > me[0] else "Up"] * abs(goal[0] - me[0]) + ["Right" if goal[1] > me[1] else "Left"] * abs(goal[1] - me[1])
    grid = dataclasses.replace(SOKOBAN, env_type=None, max_steps=8, agent_runner_cls="examples.agents.grid_agent.GridAgent")

    def play(engine):
        sampling = dataclasses.replace(greedy(48), do_sample=True, temperature=1.0)
        return ProxyEnvManager("GridAgent", grid, manager_config(sampling), tokenizer, PolicyProxy([engine]),
                               sequence_length=2048).run_episode(seed)

    (walked,) = play(ScriptedPolicy(model, tokenizer, [tool_call_text("qwen2", d) for d in path]))
    assert walked.score == 1.0 and walked.env_metrics["agent/calls"] == len(path) == walked.env_metrics["agent/samples"] * len(path)
    assert_trajectory_is_exact(model, walked)
    strategy = HFInferStrategy(tiny_model_dir)
    try:
        (lost,) = play(strategy)
    finally:
        strategy.shutdown()
    # never moved: the agent's score is the distance it was left from the goal, and no success
    assert lost.score == -len(path) / 8 and lost.env_metrics["success"] == 0.0 and lost.env_metrics["agent/calls"] == 8
