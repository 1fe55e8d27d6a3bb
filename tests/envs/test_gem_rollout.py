"""GEM envs through the env manager: episodes with a tiny random model (real inference engine, exact
log-probs), and with a scripted proxy whose boxed answers reach GEM and score."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.agentic.env import make_env
from roll.configs.agentic_config import CustomEnvConfig
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy import PolicyProxy, RandomProxy
from roll.workers.infer_worker import InferWorker

from tests.rollout.helpers import fresh_logprobs, greedy, infer_config, manager_config

pytest.importorskip("gem", reason="GEM is an optional dependency: pip install 'roll[gem]' (scripts/bootstrap.sh installs it)")

SPECS = {
    "GuessTheNumber": CustomEnvConfig(env_type="gem", max_steps=3, max_tokens_per_step=10, env_config={
        "gem_id": "game:GuessTheNumber-v0", "max_steps": 3, "format_penalty": -0.1,
        "gem_kwargs": {"min_number": 1, "max_number": 20, "max_turns": 10}}),
    "TowerofHanoi": CustomEnvConfig(env_type="gem", max_steps=3, max_tokens_per_step=10, env_config={
        "gem_id": "game:TowerofHanoi-v0-easy", "max_steps": 3, "format_penalty": -0.1}),
    "LegCounting": CustomEnvConfig(env_type="gem", max_steps=1, max_tokens_per_step=10, env_config={
        "gem_id": "rg:leg_counting", "max_steps": 1, "format_penalty": -0.1, "gem_kwargs": {"size": 20, "seed": 1}}),
}


def test_gem_episodes_with_a_tiny_model_are_penalised_and_token_exact(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    worker = InferWorker(infer_config(tiny_model_dir))
    try:
        trajectories = {tag: TrajEnvManager(tag, spec, manager_config(greedy(10)), tokenizer, PolicyProxy([worker]),
                                            sequence_length=4096).run_episode(seed=3)[0]
                        for tag, spec in SPECS.items()}
    finally:
        worker.shutdown()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    first_words = {"GuessTheNumber": "Guess The Number", "TowerofHanoi": "Tower of Hanoi", "LegCounting": "legs"}
    for tag, traj in trajectories.items():
        max_steps = SPECS[tag].max_steps
        # a random model writes no \boxed{}: every turn costs the penalty, GEM's state never moves
        assert traj.step_rewards == [-0.1] * max_steps, tag
        assert traj.env_metrics["action_is_valid"] == 0.0 and traj.env_metrics["success"] == 0.0
        first_user = traj.messages[1]["content"]
        assert first_words[tag] in first_user
        if tag != "LegCounting":
            assert ("Enter your next guess" if tag == "GuessTheNumber" else "A: [3, 2, 1]") in first_user
        mask = torch.tensor(traj.response_mask, dtype=torch.bool)
        fresh = fresh_logprobs(model, traj.input_ids)
        assert torch.allclose(fresh[mask], torch.tensor(traj.infer_logprobs)[mask], atol=1e-4)


def test_boxed_answers_reach_gem_and_score(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    spec = SPECS["LegCounting"]
    env = make_env("gem", **spec.env_config)
    env.reset(seed=5)
    answer = env.gem_env.data["answer"]
    proxy = RandomProxy(tokenizer, answers=[answer], template="So the answer is \\boxed{{{answer}}}")
    (traj,) = TrajEnvManager("LegCounting", dataclasses.replace(spec, max_tokens_per_step=64), manager_config(), tokenizer,
                             proxy, sequence_length=4096).run_episode(seed=5)
    assert traj.score == 1.0 and traj.env_metrics["success"] == 1.0 and traj.stop_reason == "terminated"

    hanoi = dataclasses.replace(SPECS["TowerofHanoi"], max_tokens_per_step=64)
    proxy = RandomProxy(tokenizer, answers=["A C"], template="\\boxed{{{answer}}}")
    (traj,) = TrajEnvManager("TowerofHanoi", hanoi, manager_config(), tokenizer, proxy, sequence_length=4096).run_episode(seed=5)
    assert traj.env_metrics["action_is_valid"] == 1.0 and traj.env_metrics["num_actions"] == 3
    assert "C: [1]" in traj.messages[3]["content"]  # GEM played the first move and shows the new board
