"""The SFT warm-up of an agent runner: the user's own agent plays (the example grid agent on the official
`openai` client, through roll's OpenAI server), each of its calls answered with a random call of the tools
it offered, in the model's tool-call format. The samples teach calling those tools, never which call."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from transformers import AutoTokenizer

from roll.launch.loader import load_agentic_config
from roll.pipeline.agentic.llm_proxy.tool_calls import TOOL_CALL_FORMATS, random_tool_call
from tests.proxy_agents.helpers import MOVE_TOOL

EXAMPLE = ("examples/agents", "agent_grid")


@pytest.mark.parametrize("name", sorted(TOOL_CALL_FORMATS))
def test_a_written_call_parses_back_in_its_format(name):
    fmt = TOOL_CALL_FORMATS[name]
    (call,) = fmt.parse(fmt.write("move", {"direction": "Left"})).tool_calls
    assert (call.name, call.arguments) == ("move", {"direction": "Left"})


def test_random_calls_draw_every_enum_value_and_refuse_free_text_arguments():
    rng = random.Random(0)
    drawn = Counter(random_tool_call([MOVE_TOOL], rng)[1]["direction"] for _ in range(400))
    assert set(drawn) == {"Up", "Down", "Left", "Right"} and min(drawn.values()) > 70
    free = {"type": "function", "function": {"name": "say", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    with pytest.raises(ValueError, match="tool 'say', argument 'text': a random call draws only enum"):
        random_tool_call([free], rng)


def test_warmup_episodes_of_the_example_agent_are_its_own_chats_with_random_move_calls(tiny_model_dir):
    from roll.pipeline.agentic.sft_warmup import scripted_trajectories

    config = load_agentic_config(*EXAMPLE, [f"pretrain={tiny_model_dir}", "sft_warmup.steps=1"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trajectories = scripted_trajectories(config, tokenizer, count=6, step=0)
    assert len(trajectories) == 6  # one exact sample per episode: the agent keeps its whole history
    moves = Counter()
    for trajectory in trajectories:
        assert trajectory.tag == "GridAgent" and trajectory.env_metrics["moved"] == 1.0  # every turn a call
        assert trajectory.env_metrics["agent/unattributed_calls"] == 0.0
        ids, mask = list(trajectory.input_ids), list(trajectory.response_mask)
        trained = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        calls = [json.loads(block.split("</tool_call>")[0]) for block in trained.split("<tool_call>")[1:]]
        assert calls and all(call["name"] == "move" for call in calls)
        assert trained.count("<tool_call>") == int(trajectory.env_metrics["agent/calls"])
        moves.update(call["arguments"]["direction"] for call in calls)
        untrained = tokenizer.decode([i for i, m in zip(ids, mask) if not m])
        # the boards are prompt, never trained on; the one call there is the system prompt's example
        assert "G is" in untrained and untrained.count("<tool_call>") == 1
    assert len(moves) >= 3  # random directions, not one scripted answer


def test_an_agent_runner_warmup_must_be_random(tiny_model_dir):
    from roll.configs import ConfigError

    with pytest.raises(ConfigError, match="sft_warmup.policy: 'optimal' plays a roll env, and 'GridAgent'"):
        load_agentic_config(*EXAMPLE, [f"pretrain={tiny_model_dir}", "sft_warmup.steps=1", "sft_warmup.policy=optimal"])


def test_an_agent_that_offers_no_tools_fails_its_warmup_episode_naming_why(tiny_model_dir):
    from roll.pipeline.agentic.sft_warmup import scripted_trajectories
    from roll.pipeline.agentic.trajectory import EpisodeFailure

    config = load_agentic_config(*EXAMPLE, [f"pretrain={tiny_model_dir}", "sft_warmup.steps=1",
                                            "custom_envs.GridAgent.agent_runner_cls=tests.proxy_agents.runners.ToollessRunner"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    with pytest.raises(EpisodeFailure, match="offered no tools"):
        scripted_trajectories(config, tokenizer, count=1, step=0)
