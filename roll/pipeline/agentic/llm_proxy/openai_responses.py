"""Response bodies of the OpenAI wire format, built from roll's GenerationResults: a chat completion
(with `tool_calls` and `logprobs.content`), a text completion, and their server-sent-event chunks.

Every choice carries `token_ids` (the generated ids, eos included when generation stopped there) and
every response `prompt_token_ids`, as vLLM's `return_token_ids` does; the official client keeps such
extra fields (`choice.model_extra["token_ids"]`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from roll.pipeline.agentic.llm_proxy.tool_calls import ParsedReply


@dataclass
class Completion:
    """One generated choice, decoded: what both endpoints answer with."""

    ids: list[int]
    logprobs: list[float]
    text: str  # the reply text (eos and a matched stop string left out, as OpenAI does)
    finish_reason: str  # OpenAI's: stop | length | tool_calls
    tool_calls: list[dict] | None = None  # OpenAI tool_calls (arguments as JSON text)
    content: str | None = None  # the chat message content (text without the tool-call blocks)


def completion_from(ids: list[int], logprobs: list[float], finish: str, eos_id: int | None, decode: Callable,
                    stop_strings: tuple[str, ...] | None, parse: Callable[[str], ParsedReply] | None) -> Completion:
    ended_at_eos = finish == "stop" and bool(ids) and ids[-1] == eos_id
    text = decode(ids[:-1] if ended_at_eos else ids)
    if finish == "stop" and not ended_at_eos and stop_strings:
        cuts = [text.find(s) for s in stop_strings if s in text]
        if cuts:
            text = text[:min(cuts)]
    done = Completion(ids=ids, logprobs=logprobs, text=text, finish_reason=finish, content=text)
    if parse is not None:
        parsed = parse(text)
        if parsed.tool_calls:
            done.content = parsed.content or None
            done.tool_calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                               for c in parsed.tool_calls]
            done.finish_reason = "tool_calls"
    return done


def chat_logprobs(done: Completion, decode: Callable) -> dict:
    content = []
    for token_id, logprob in zip(done.ids, done.logprobs):
        token = decode([token_id])
        content.append({"token": token, "logprob": float(logprob), "bytes": list(token.encode("utf-8")), "top_logprobs": []})
    return {"content": content, "refusal": None}


def assistant_message(done: Completion) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": done.content}
    if done.tool_calls:
        message["tool_calls"] = done.tool_calls
    return message


def usage(prompt_ids: list[int], choices: list[Completion]) -> dict:
    generated = sum(len(c.ids) for c in choices)
    return {"prompt_tokens": len(prompt_ids), "completion_tokens": generated, "total_tokens": len(prompt_ids) + generated}


def chat_response(model: str, prompt_ids: list[int], choices: list[Completion], with_logprobs: bool, decode: Callable) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": i, "message": assistant_message(c), "finish_reason": c.finish_reason,
                     "logprobs": chat_logprobs(c, decode) if with_logprobs else None, "token_ids": c.ids}
                    for i, c in enumerate(choices)],
        "usage": usage(prompt_ids, choices), "prompt_token_ids": prompt_ids,
    }


def text_response(model: str, prompt_ids: list[int], choices: list[Completion], with_logprobs: bool, decode: Callable) -> dict:
    def logprobs(c: Completion) -> dict:
        tokens = [decode([t]) for t in c.ids]
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        return {"tokens": tokens, "token_logprobs": [float(x) for x in c.logprobs], "top_logprobs": None, "text_offset": offsets}

    return {
        "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()), "model": model,
        "choices": [{"index": i, "text": c.text, "finish_reason": c.finish_reason,
                     "logprobs": logprobs(c) if with_logprobs else None, "token_ids": c.ids}
                    for i, c in enumerate(choices)],
        "usage": usage(prompt_ids, choices), "prompt_token_ids": prompt_ids,
    }


def _event(payload: dict | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)}\n\n"


def chat_chunks(response: dict, include_usage: bool) -> Iterator[str]:
    """A finished chat completion as SSE chunks: per choice the role, the content, the tool calls,
    then the finish reason (with the choice's token_ids); the usage when asked; `[DONE]`."""
    head = {key: response[key] for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(index: int, delta: dict, finish: str | None = None, **extra: Any) -> str:
        return _event({**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None, **extra}]})

    for choice in response["choices"]:
        index, message = choice["index"], choice["message"]
        yield chunk(index, {"role": "assistant", "content": ""})
        if message.get("content"):
            yield chunk(index, {"content": message["content"]})
        for k, call in enumerate(message.get("tool_calls") or []):
            yield chunk(index, {"tool_calls": [{"index": k, **call}]})
        if choice["logprobs"]:
            yield _event({**head, "choices": [{"index": index, "delta": {}, "finish_reason": None, "logprobs": choice["logprobs"]}]})
        yield chunk(index, {}, choice["finish_reason"], token_ids=choice["token_ids"])
    if include_usage:
        yield _event({**head, "choices": [], "usage": response["usage"], "prompt_token_ids": response["prompt_token_ids"]})
    yield _event("[DONE]")


def text_chunks(response: dict, include_usage: bool) -> Iterator[str]:
    head = {key: response[key] for key in ("id", "created", "model", "object")}
    for choice in response["choices"]:
        yield _event({**head, "choices": [choice]})
    if include_usage:
        yield _event({**head, "choices": [], "usage": response["usage"], "prompt_token_ids": response["prompt_token_ids"]})
    yield _event("[DONE]")
