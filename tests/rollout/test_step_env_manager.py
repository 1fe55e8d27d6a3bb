"""StepEnvManager: one sample per turn whose ids are exactly the prompt the policy saw and the tokens it
produced (fresh-forward log-probs equal the generation log-probs), with ROLL's step template, the
last history_length turns in the prompt, and the env state of each turn."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.agentic.env import make_env
from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager
from roll.pipeline.agentic.llm_proxy import PolicyProxy, RandomProxy
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.workers.infer_worker import InferWorker

from tests.conftest import roll_examples
from tests.rollout.helpers import FROZEN_LAKE_SPEC, fresh_logprobs, infer_config, manager_config
from roll.configs.worker_config import GeneratingArgs



def roll_step_spec():
    """FrozenLake with ROLL's step-wise templates (its config/step_envs.yaml; skips without ROLL's examples)."""
    step_envs = OmegaConf.load(roll_examples("config", "step_envs.yaml"))
    return dataclasses.replace(FROZEN_LAKE_SPEC, history_length=2, agent_template=step_envs.agent_template,
                               agent_system_template=step_envs.agent_system_template)


def test_each_turn_sample_is_the_prompt_seen_and_the_tokens_produced(tiny_model_dir):
    worker = InferWorker(infer_config(tiny_model_dir))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    sampling = GeneratingArgs(max_new_tokens=12, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    try:
        manager = StepEnvManager("FrozenLake", roll_step_spec(), manager_config(sampling), tokenizer,
                                 PolicyProxy([worker]), sequence_length=4096)
        samples = manager.run_episode(seed=3)
    finally:
        worker.shutdown()
    # the random tiny model never answers validly: five penalised turns, five samples
    assert [s.step_index for s in samples] == [0, 1, 2, 3, 4]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for s in samples:
        assert s.step_rewards == [-0.01] * 5 and s.score == pytest.approx(-0.05)
        assert len(s.actions) == 5 and s.stop_reason == "truncated"
        # the prompt ids are the chat template's rendering of this sample's system + user messages
        system, user, assistant = s.messages
        prompt = tokenizer.apply_chat_template([system, user], tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
        n = len(prompt_ids)
        assert s.input_ids[:n] == prompt_ids and s.response_mask == [0] * n + [1] * (len(s.input_ids) - n)
        assert 1 <= s.generated_tokens == len(s.input_ids) - n <= 12
        reply = tokenizer.decode(s.input_ids[n:], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        assert reply == assistant["content"] == s.actions[s.step_index]
        # fresh forward of the sample's ids gives the log-probs recorded when they were sampled
        fresh = fresh_logprobs(model, s.input_ids)[n:]
        assert torch.allclose(fresh, torch.tensor(s.infer_logprobs[n:]), atol=1e-4), (fresh - torch.tensor(s.infer_logprobs[n:])).abs().max()
        assert s.infer_logprobs[:n] == [0.0] * n
        # ROLL's step template fields
        assert f"You are currently at step {s.step_index + 1}." in user["content"]
        assert f"Prior to this step, you have completed {s.step_index} steps." in user["content"]
        assert "## Env Instruction: You are solving the FrozenLake puzzle" in user["content"]


def test_the_prompt_shows_the_last_history_length_turns_and_states_are_recorded(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    proxy = RandomProxy(tokenizer, seed=7)
    spec = dataclasses.replace(FROZEN_LAKE_SPEC, history_length=2, max_steps=5,
                               agent_template="{history}\nNOW {current_step}: {current_observation}")
    samples = StepEnvManager("FrozenLake", spec, manager_config(), tokenizer, proxy, sequence_length=4096).run_episode(seed=11)
    assert len(samples) >= 2
    replay = make_env("frozen_lake", **spec.env_config)
    observation, _ = replay.reset(11)
    observations = []
    for s in samples:  # the state key is the env's state before the turn's action
        assert s.state_key == replay.state_key()
        observations.append(observation)
        observation, *_ = replay.step(s.actions[s.step_index])
    for s in samples:
        user = s.messages[1]["content"]
        t = s.step_index
        assert user.endswith(f"NOW {t + 1}: {observations[t]}")
        shown = [k for k in range(t) if f"[step {k + 1}] observation:" in user]
        assert shown == list(range(max(0, t - 2), t))  # the last two earlier turns, no older ones
        for k in shown:
            assert f"[step {k + 1}] observation:\n{observations[k]}\nyour response: {s.actions[k]}" in user
    batch = trajectories_to_batch(samples, tokenizer.pad_token_id)
    assert batch["step_index"] == list(range(len(samples))) and batch["state_key"] == [s.state_key for s in samples]


def test_an_unknown_template_field_is_named(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    spec = dataclasses.replace(FROZEN_LAKE_SPEC, agent_template="{obs}")
    manager = StepEnvManager("FrozenLake", spec, manager_config(), tokenizer, RandomProxy(tokenizer), sequence_length=4096)
    with pytest.raises(ValueError, match=r"agent_template uses an unknown field 'obs'.*\{current_observation\}"):
        manager.run_episode(seed=1)


def test_the_concat_variant_shows_earlier_observations_without_replies(tiny_model_dir):
    from roll.pipeline.agentic.env_manager.step_concat_env_manager import StepConcatEnvManager

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    spec = dataclasses.replace(FROZEN_LAKE_SPEC, history_length=1, agent_template="{history}\nNOW: {current_observation}")
    samples = StepConcatEnvManager("FrozenLake", spec, manager_config(), tokenizer, RandomProxy(tokenizer, seed=3),
                                   sequence_length=4096).run_episode(seed=11)
    assert StepConcatEnvManager.step_samples and len(samples) >= 2
    replay = make_env("frozen_lake", **spec.env_config)
    first, _ = replay.reset(11)
    user = samples[1].messages[1]["content"]
    # instruction (the template has no {env_instruction}), then turn 0's observation alone, then this turn's
    instruction, history_and_now = user.split("\n", 1)[0], user.split("Answer format: <answer>Left</answer>\n", 1)[1]
    assert instruction.startswith("You are solving the FrozenLake puzzle")
    assert history_and_now.startswith(first + "\nNOW: ") and "your response" not in user
