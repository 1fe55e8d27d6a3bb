"""roll's OpenAI-compatible server, driven by the official `openai` client against a real tiny model."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer
from roll.strategies.hf_infer import HFInferStrategy
from tests.proxy_agents.helpers import MOVE_TOOL, ScriptedPolicy, load_with_tool_template, tool_call_text


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    server = OpenAIServer(strategy.tokenizer, engine=strategy).start()
    yield server, strategy
    server.stop()
    strategy.shutdown()


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


def test_models_chat_n_logprobs_and_token_ids(served):
    server, strategy = served
    api = client(server.base_url)
    assert [m.id for m in api.models.list().data] == ["roll-policy"]
    assert [m.id for m in client(server.episode_url("any")).models.list().data] == ["roll-policy"]
    reply = api.chat.completions.create(model="roll-policy", messages=[{"role": "user", "content": "Go left"}], n=3,
                                        max_tokens=6, temperature=1.0, seed=7, logprobs=True)
    assert len(reply.choices) == 3
    prompt_ids = reply.model_extra["prompt_token_ids"]
    assert prompt_ids == strategy.tokenizer.encode(strategy.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Go left"}], tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    samples = set()
    for choice in reply.choices:
        ids = choice.model_extra["token_ids"]
        assert 1 <= len(ids) <= 6 and len(choice.logprobs.content) == len(ids)
        assert all(lp.logprob <= 0 for lp in choice.logprobs.content)
        samples.add(tuple(ids))
    assert len(samples) > 1  # n choices are drawn with different seeds
    again = api.chat.completions.create(model="roll-policy", messages=[{"role": "user", "content": "Go left"}], n=3,
                                        max_tokens=6, temperature=1.0, seed=7)
    assert [c.model_extra["token_ids"] for c in again.choices] == [c.model_extra["token_ids"] for c in reply.choices]
    usage = reply.usage
    assert usage.prompt_tokens == len(prompt_ids) and usage.completion_tokens == sum(len(s) for s in
                                                                                      (c.model_extra["token_ids"] for c in reply.choices))


def test_streaming_gives_the_same_reply_as_a_plain_call(served):
    server, _ = served
    api = client(server.base_url)
    body = dict(model="m", messages=[{"role": "user", "content": "Where is the goal?"}], max_tokens=8, temperature=0)
    plain = api.chat.completions.create(**body)
    chunks = list(api.chat.completions.create(**body, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [plain.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    streamed = list(api.completions.create(model="m", prompt="Turn 1:", max_tokens=5, temperature=0, stream=True))
    assert streamed[0].choices[0].text == api.completions.create(model="m", prompt="Turn 1:", max_tokens=5, temperature=0).choices[0].text


def test_completions_take_token_ids_and_honour_stop(served):
    server, strategy = served
    api = client(server.base_url)
    prompt = strategy.tokenizer.encode("Turn 1: Observation:", add_special_tokens=False)
    out = api.completions.create(model="m", prompt=prompt, max_tokens=12, temperature=0, logprobs=1)
    choice = out.choices[0]
    assert out.model_extra["prompt_token_ids"] == prompt
    assert len(choice.logprobs.token_logprobs) == len(choice.model_extra["token_ids"])
    text = choice.text
    if len(text) > 2:  # stop at a string the greedy reply contains: it ends there, the stop string left out
        stop = text[1:3]
        cut = api.completions.create(model="m", prompt=prompt, max_tokens=12, temperature=0, stop=[stop]).choices[0]
        assert cut.finish_reason == "stop" and cut.text == text[:text.find(stop)]


@pytest.mark.parametrize("body,param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 0}, "n"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3, "logprobs": True}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": "hi"}], "presence_penalty": 0.5}, "presence_penalty"),
    ({"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "function", "function": {"name": "jump"}},
      "tools": [MOVE_TOOL]}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "hi"}], "best_friend": 1}, "best_friend"),
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "move", "arguments": "{not json"}}]}]},
     "messages.0.tool_calls.0.function.arguments"),
])
def test_a_bad_request_is_a_400_naming_the_field(served, body, param):
    server, _ = served
    with pytest.raises(openai.BadRequestError) as err:
        fields = dict(body)  # anything beside messages goes as sent, even what the client does not know
        client(server.base_url).chat.completions.create(model="m", messages=fields.pop("messages"), extra_body=fields)
    assert err.value.status_code == 400 and err.value.body["param"] == param
    assert param.split(".")[-1] in err.value.body["message"]


def test_malformed_json_and_unknown_episode_keys_get_error_bodies(served):
    server, _ = served
    raw = httpx.post(f"{server.base_url}/chat/completions", content=b"{oops", headers={"Content-Type": "application/json"})
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError) as err:
        client(server.episode_url("nobody")).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "nobody" in err.value.body["message"]
    assert httpx.get(f"{server.base_url}/nothing").json()["error"]["message"]


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_tool_calls_come_back_as_openai_tool_calls(arch, tiny_model_dir, tiny_llama_dir):
    tokenizer, model = load_with_tool_template(tiny_model_dir if arch == "qwen2" else tiny_llama_dir, arch)
    policy = ScriptedPolicy(model, tokenizer, [tool_call_text(arch, "Up"), "Done.", tool_call_text(arch, "Left")])
    server = OpenAIServer(tokenizer, engine=policy).start()
    try:
        api = client(server.base_url)
        messages = [{"role": "user", "content": "Push the box."}]
        first = api.chat.completions.create(model="m", messages=messages, tools=[MOVE_TOOL], max_tokens=64)
        call = first.choices[0].message.tool_calls[0]
        assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "move"
        assert json.loads(call.function.arguments) == {"direction": "Up"}
        assert "move" in tokenizer.decode(first.model_extra["prompt_token_ids"])  # the template showed the tool
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "You moved up."}]
        second = api.chat.completions.create(model="m", messages=messages, tools=[MOVE_TOOL], max_tokens=64)
        assert second.choices[0].message.content == "Done." and not second.choices[0].message.tool_calls
        # tool_choice none: the same text is plain content
        plain = api.chat.completions.create(model="m", messages=messages[:1], tools=[MOVE_TOOL], tool_choice="none", max_tokens=64)
        assert plain.choices[0].message.tool_calls is None and "move" in plain.choices[0].message.content
    finally:
        server.stop()


def test_64_concurrent_episodes_lose_no_call(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    server = OpenAIServer(strategy.tokenizer).start()  # no engine: every call must name its episode
    turns = 3

    def episode(i: int) -> int:
        key = f"ep{i}"
        recorder = server.open_episode(key, strategy.generate)
        api = client(server.episode_url(key))
        messages = [{"role": "user", "content": f"Episode {i}: go."}]
        for _ in range(turns):
            reply = api.chat.completions.create(model="m", messages=messages, max_tokens=4, temperature=1.0)
            messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                         {"role": "user", "content": "again"}]
        server.close_episode(key)
        assert recorder.metrics()["agent/unattributed_calls"] == 0
        assert len(recorder.samples) == 1 and recorder.samples[0].calls == turns  # one multi-turn sample
        return len(recorder.calls)

    try:
        with ThreadPoolExecutor(64) as pool:
            counts = list(pool.map(episode, range(64)))
    finally:
        server.stop()
        strategy.shutdown()
    assert counts == [turns] * 64


def test_a_bearer_token_keys_the_episode_like_the_path(served):
    server, strategy = served
    recorder = server.open_episode("token-7", strategy.generate)
    body = dict(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    try:
        openai.OpenAI(base_url=server.base_url, api_key="token-7", max_retries=0).chat.completions.create(**body)
        openai.OpenAI(base_url=server.base_url, api_key="someone-else", max_retries=0).chat.completions.create(**body)
    finally:
        server.close_episode("token-7")
    assert len(recorder.calls) == 1  # the other key was served by the engine, unrecorded
