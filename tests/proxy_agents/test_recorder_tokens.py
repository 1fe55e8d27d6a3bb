"""The recorder's token guarantee, for ChatML and Llama-3 templates with tool calls: every recorded
sample is exactly what the policy saw and generated (a fresh forward pass gives the generation
log-probs to 1e-4), a rewritten history starts a new exact sample, a foreign prefix is left out."""

from __future__ import annotations

import openai
import pytest

from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer
from roll.strategies.hf_infer import HFInferStrategy
from tests.proxy_agents.helpers import MOVE_TOOL, ScriptedPolicy, assert_sample_is_exact, load_with_tool_template, tool_call_text

ARCHS = ["qwen2", "llama"]


@pytest.fixture(params=ARCHS)
def scripted(request, tiny_model_dir, tiny_llama_dir):
    arch = request.param
    tokenizer, model = load_with_tool_template(tiny_model_dir if arch == "qwen2" else tiny_llama_dir, arch)
    server = OpenAIServer(tokenizer).start()
    yield arch, tokenizer, model, server
    server.stop()


def open_episode(server, key, policy):
    recorder = server.open_episode(key, policy.generate)
    return recorder, openai.OpenAI(base_url=server.episode_url(key), api_key="x", max_retries=0)


def tool_turn(api, messages, result: str) -> None:
    """One call; its reply and (when it called the tool) the tool's answer join the messages."""
    reply = api.chat.completions.create(model="m", messages=messages, tools=[MOVE_TOOL], max_tokens=64).choices[0].message
    messages.append(reply.model_dump(exclude_none=True))
    for call in reply.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def test_a_tool_calling_episode_is_one_exact_sample(scripted):
    arch, tokenizer, model, server = scripted
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text(arch, "Up"), tool_call_text(arch, "Left"), "Solved it."])
    recorder, api = open_episode(server, "e1", policy)
    messages = [{"role": "system", "content": "You play Sokoban."}, {"role": "user", "content": "Push the box onto the target."}]
    for result in ("moved Up", "moved Left", ""):
        tool_turn(api, messages, result)
    server.close_episode("e1")
    assert recorder.metrics() == {"agent/calls": 3.0, "agent/unattributed_calls": 0.0, "agent/samples": 1.0}
    (sample,) = recorder.samples
    assert_sample_is_exact(model, sample.tokens)
    # each call's prompt was the sample so far: it continued the earlier replies token for token
    row = sample.tokens.input_ids
    assert all(row[:len(r.input_ids)] == list(r.input_ids) for r in policy.requests)
    # ... which re-rendering the conversation as text would not have given (tojson re-spaces the calls)
    rendered = tokenizer.apply_chat_template(messages[:-1], tools=[MOVE_TOOL], tokenize=False, add_generation_prompt=True)
    assert tokenizer.encode(rendered, add_special_tokens=False) != list(policy.requests[-1].input_ids)
    (traj,) = recorder.trajectories(score=1.0, step_rewards=[0.0, 1.0], metrics={"success": 1.0}, tag="Sokoban", seed=3)
    assert traj.input_ids == row and traj.generated_tokens == sum(sample.tokens.response_mask)
    assert traj.env_metrics["success"] == 1.0 and traj.env_metrics["agent/calls"] == 3.0


def test_the_same_call_written_twice_in_other_spacing_stays_one_sample(scripted):
    # both replies parse to move(Up) with no text: one reply_key for two different id sequences; the
    # history's first such message is the first generated, the second the second
    arch, tokenizer, model, server = scripted
    spaced = tool_call_text(arch, "Up").replace('":"', '": "').replace('","', '", "')
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text(arch, "Up"), spaced, "Done."])
    recorder, api = open_episode(server, "e5", policy)
    messages = [{"role": "user", "content": "Go up twice."}]
    for result in ("moved Up", "moved Up", ""):
        tool_turn(api, messages, result)
    server.close_episode("e5")
    assert tokenizer.encode(spaced) != tokenizer.encode(tool_call_text(arch, "Up"))
    (sample,) = recorder.samples
    assert sample.calls == 3
    assert_sample_is_exact(model, sample.tokens)


def test_a_rewritten_history_gives_several_exact_samples(scripted):
    arch, tokenizer, model, server = scripted
    replies = [tool_call_text(arch, d) for d in ("Up", "Left", "Down", "Right")]
    policy = ScriptedPolicy(model, tokenizer, replies)
    recorder, api = open_episode(server, "e2", policy)
    system = {"role": "system", "content": "You play Sokoban."}
    messages = [system, {"role": "user", "content": "Turn 1."}]
    tool_turn(api, messages, "moved")
    tool_turn(api, messages, "moved")
    # the agent compacts its memory: only the system prompt and a summary remain
    messages = [system, {"role": "user", "content": "So far you moved Up and Left. Turn 3."}]
    tool_turn(api, messages, "moved")
    tool_turn(api, messages, "moved")
    server.close_episode("e2")
    assert [s.calls for s in recorder.samples] == [2, 2]
    assert recorder.metrics()["agent/unattributed_calls"] == 0
    for sample in recorder.samples:
        assert_sample_is_exact(model, sample.tokens)
    assert len(recorder.trajectories(0.0, [], {}, "Sokoban", 0)) == 2


def test_a_call_with_a_foreign_prefix_is_reported_and_left_out(scripted):
    arch, tokenizer, model, server = scripted
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text(arch, "Up"), "Fine.", tool_call_text(arch, "Down")])
    recorder, api = open_episode(server, "e3", policy)
    messages = [{"role": "user", "content": "Turn 1."}]
    tool_turn(api, messages, "moved")
    # a reply the policy never wrote (the agent edited it): the call is answered, not trained on
    forged = [*messages[:1], {"role": "assistant", "content": "I will win."}, {"role": "user", "content": "Go on."}]
    api.chat.completions.create(model="m", messages=forged, max_tokens=8)
    tool_turn(api, messages, "moved")
    server.close_episode("e3")
    assert recorder.metrics() == {"agent/calls": 3.0, "agent/unattributed_calls": 1.0, "agent/samples": 1.0}
    assert "not generated by the policy" in recorder.left_out()[0]
    (sample,) = recorder.samples
    assert sample.calls == 2
    assert_sample_is_exact(model, sample.tokens)
    assert "I will win" not in tokenizer.decode(sample.tokens.input_ids)


@pytest.mark.parametrize("arch", ARCHS)
def test_sampled_multi_turn_chat_is_exact_with_a_real_engine(arch, tiny_model_dir, tiny_llama_dir):
    strategy = HFInferStrategy(tiny_model_dir if arch == "qwen2" else tiny_llama_dir)
    server = OpenAIServer(strategy.tokenizer).start()
    _, model = load_with_tool_template(tiny_model_dir if arch == "qwen2" else tiny_llama_dir, arch)
    try:
        recorder = server.open_episode("real", strategy.generate)
        api = openai.OpenAI(base_url=server.episode_url("real"), api_key="x", max_retries=0)
        messages = [{"role": "system", "content": "You are a good game player."}]
        for turn in range(4):
            messages.append({"role": "user", "content": f"Turn {turn}: the box is left of you."})
            reply = api.chat.completions.create(model="m", messages=messages, max_tokens=10, temperature=1.0, seed=turn)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        server.close_episode("real")
    finally:
        server.stop()
        strategy.shutdown()
    (sample,) = recorder.samples
    assert sample.calls == 4
    assert_sample_is_exact(model, sample.tokens)
