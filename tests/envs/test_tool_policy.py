"""The scripted tool user (sft_warmup.policy: tool): it calls the sandboxed tool with code that computes
the task, then answers what the tool printed, so its answers come only from the tool; its warm-up
episodes, played by the tool env manager with a real tokenizer and sandbox, are token-exact chats with
the tool output masked out of the loss."""

from __future__ import annotations

import random

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.policies import tool_use_text
from roll.configs.errors import ConfigError
from roll.launch.loader import load_agentic_config

EXAMPLE = ("examples/smollm2-135M-agentic_cpu", "agent_val_tool_use")


@pytest.mark.parametrize("task,call_format", [("multiplication", "tagged"), ("table_lookup", "json")])
def test_the_tool_user_solves_each_task_through_the_tool(task, call_format):
    env = make_env("tool_use", task=task, tool_call_format=call_format, num_digits=9)
    for seed in range(3):
        observation, _ = env.reset(seed=seed)
        call = tool_use_text(env, observation)
        assert str(env.task.answer) not in call  # the call computes the number, it does not hold it
        output, reward, terminated, _, info = env.step(call)
        assert info["observation_role"] == "tool" and output.strip() == str(env.task.answer)
        answer = tool_use_text(env, output)
        _, reward, terminated, _, info = env.step(answer)
        assert terminated and reward == 1.0 and info["metrics"]["success"] == 1.0 and info["metrics"]["used_tool"] == 1.0


def test_the_tool_user_answers_only_what_the_tool_printed():
    env = make_env("tool_use", task="multiplication", num_digits=6)
    observation, _ = env.reset(seed=1)
    env.step(tool_use_text(env, observation))
    wrong = str(env.task.answer + 1)
    _, reward, terminated, _, info = env.step(tool_use_text(env, f"{wrong}\n"))  # a tool that printed something else
    assert terminated and info["metrics"]["success"] == 0.0 and env.answer == int(wrong)


def test_the_tool_user_needs_a_tool_env():
    with pytest.raises(ValueError, match="needs an env with a Python tool"):
        tool_use_text(make_env("frozen_lake"), "")


def test_the_no_tool_baseline_offers_no_tool_and_refuses_a_call():
    env = make_env("tool_use", task="multiplication", num_digits=5, tool_wrapper={"wrapper_args": {"max_tool_uses": 0}})
    _, info = env.reset(seed=2)
    assert "no tool is available" in info["env_instruction"] and "<python>" not in info["env_instruction"]
    _, reward, terminated, _, info = env.step(f"<python>print({random.randint(1, 9)})</python>")
    assert not terminated and reward == env.config.format_penalty and info["metrics"]["used_tool"] == 0.0
    assert "no tool calls left" in info["invalid_reason"]


def test_warmup_episodes_of_the_example_are_tool_chats_with_tool_output_masked(tiny_model_dir):
    from transformers import AutoTokenizer

    from roll.pipeline.agentic.sft_warmup import scripted_trajectories

    config = load_agentic_config(*EXAMPLE, [f"pretrain={tiny_model_dir}"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trajectories = scripted_trajectories(config, tokenizer, count=3, step=0)
    assert len(trajectories) == 3
    for trajectory in trajectories:
        roles = [m["role"] for m in trajectory.messages]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        question = trajectory.messages[1]["content"]
        tool_output = trajectory.messages[3]["content"]
        a, b = (int(x) for x in question.split("What is ")[1].split("?")[0].split(" * "))
        assert tool_output == str(a * b) and trajectory.messages[4]["content"] == f"<answer>{a * b}</answer>"
        assert trajectory.env_metrics["success"] == 1.0 and trajectory.env_metrics["used_tool"] == 1.0
        assert trajectory.score == pytest.approx(1.0 + 0.1)  # correct answer + tool_success_reward
        ids, mask = list(trajectory.input_ids), list(trajectory.response_mask)
        trained = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert "<python>print(" in trained and f"<answer>{a * b}</answer>" in trained
        untrained = tokenizer.decode([i for i, m in zip(ids, mask) if not m])
        assert str(a * b) in untrained  # the tool's output is prompt, never trained on


def test_the_tool_policy_is_refused_at_load_for_an_env_without_a_tool(tiny_model_dir):
    with pytest.raises(ConfigError, match="sft_warmup.policy: 'tool' calls a Python tool, which env 'FrozenLakeCPU'"):
        load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                            [f"pretrain={tiny_model_dir}", "sft_warmup.policy=tool"])
    with pytest.raises(ConfigError, match="sft_warmup.policy: 'tools' is not one of"):
        load_agentic_config(*EXAMPLE, [f"pretrain={tiny_model_dir}", "sft_warmup.policy=tools"])
