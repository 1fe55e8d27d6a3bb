"""The prompt ids of a chat request, with the policy's earlier replies as the exact ids it generated.

An agent sends its whole conversation as messages on every call. Rendering it with the chat template
and tokenising the text would re-tokenise the policy's earlier replies, and the ids can differ from
what it sampled (a tool call's JSON re-serialised, a word split differently), so the next sample
would not continue the earlier one. Here the conversation is rendered once, and each assistant turn
that repeats a reply the policy generated in this episode is replaced by that reply's generated ids;
only the text between such turns is tokenised, always cut at the same places, so a call whose
messages extend an earlier call's gets prompt ids that extend that call's prompt + completion token
for token.

Two replies can match one assistant message (the same call written with other spacing has the same
text and arguments): the n-th such message in the conversation takes the n-th such reply, in the
order they were generated, so an append-only history continues token for token.

An assistant turn the policy never generated in this episode is *foreign*; the caller decides what
to do with the call (the recorder leaves it out of training). A generated turn that the template
renders differently in this conversation (it drops earlier `<think>` blocks, say) keeps the
template's text: the prompt then does not continue the earlier sample, and a new sample starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_PROBE = "x7"  # assistant content no template trims or escapes: reveals the turn's closing text


def canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def reply_key(message: dict) -> str:
    """What identifies an assistant reply in a later request: its text and its tool calls (names and
    arguments, whatever the JSON's spacing or key order; tool-call ids are the client's business)."""
    calls = [(c["function"]["name"], canonical_arguments(c["function"].get("arguments", {})))
             for c in message.get("tool_calls") or []]
    return json.dumps([(message.get("content") or "").strip(), calls], ensure_ascii=False)


def template_message(role: str, content: str, tool_calls: list[dict] | None = None, **extra: Any) -> dict:
    """A message as chat templates read it (HF convention): tool-call arguments as a dict."""
    message: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": content, **extra}
    if tool_calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c["function"]["name"], "arguments": _as_dict(c["function"].get("arguments", {}))}}
            for c in tool_calls]
    return message


def _as_dict(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return arguments
    return arguments


@dataclass
class GeneratedReply:
    """A reply the policy generated: its ids (with the eos when it stopped there)."""

    ids: list[int]
    ended_at_eos: bool


@dataclass
class PromptIds:
    ids: list[int]
    foreign_turns: list[int] = field(default_factory=list)  # indices of assistant messages the policy never wrote
    spliced_turns: int = 0  # assistant messages entered as their generated ids


class ChatRenderer:
    """The tokenizer's chat template, with the request's tools when there are any."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template: roll's OpenAI server renders chat requests with the "
                             "model's own template")
        self.tokenizer = tokenizer

    def render(self, messages: list[dict], tools: list[dict] | None, generation_prompt: bool) -> str:
        options = {"tools": tools} if tools else {}
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                                  **options)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def build(self, messages: list[dict], tools: list[dict] | None,
              replies: dict[str, list[GeneratedReply]]) -> PromptIds:
        """`replies`: the episode's generated replies by reply_key, each key's in generation order."""
        full = self.render(messages, tools, generation_prompt=True)
        out = PromptIds(ids=[])
        pending, pos = "", 0  # template text owed after the last spliced reply; where `full` is consumed up to
        seen: dict[str, int] = {}  # assistant messages met so far per reply_key
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            key = reply_key(message)
            generated = replies.get(key)
            if not generated:
                out.foreign_turns.append(index)
                continue
            # more such messages than replies (an agent that repeats one): the latest reply
            nth = seen.get(key, 0)
            reply = generated[min(nth, len(generated) - 1)]
            seen[key] = nth + 1
            head = self.render(messages[:index], tools, generation_prompt=True)
            turn = self.render(messages[:index + 1], tools, generation_prompt=False)
            close = self._closing_text(messages[:index], tools, head)
            if close is None or pos > len(head) or not (turn.startswith(head) and turn.endswith(close) and full.startswith(turn)):
                continue  # the template renders this turn otherwise here: its text stays, a new sample starts
            out.ids += self.encode(pending + full[pos:len(head)])
            out.ids += reply.ids
            eos_text = self.tokenizer.decode(reply.ids[-1:], skip_special_tokens=False) if reply.ended_at_eos else ""
            # the generated eos usually is the template's closing token: do not add it twice
            pending = close[len(eos_text):] if eos_text and close.startswith(eos_text) else close
            pos = len(turn)
            out.spliced_turns += 1
        out.ids += self.encode(pending + full[pos:])
        return out

    def _closing_text(self, before: list[dict], tools: list[dict] | None, head: str) -> str | None:
        probe = self.render(before + [{"role": "assistant", "content": _PROBE}], tools, generation_prompt=False)
        return probe[len(head) + len(_PROBE):] if probe.startswith(head + _PROBE) else None
