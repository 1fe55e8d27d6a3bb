"""Tool calls in the model's own chat-template format, parsed into OpenAI `tool_calls`.

A model trained for tools writes its calls as text in the format its chat template renders them:
- `hermes` (Qwen2/2.5/3, ChatML models): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`,
  one block per call, possibly after some text.
- `llama3_json` (Llama-3.1/3.2): the whole reply is a JSON object `{"name": ..., "parameters": {...}}`
  (optionally after `<|python_tag|>`); several calls are separated by `;`.

`TOOL_CALL_FORMATS` is the registry (each format's parser, and its writer: a call as the model writes
it, for scripted replies); `parser_for_template` picks one from a chat template's text. A reply that
does not parse as a call stays plain content (the env or agent judges it), never an error.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: dict  # the call's arguments as parsed JSON


@dataclass(frozen=True)
class ParsedReply:
    content: str  # the reply's text without the tool-call blocks
    tool_calls: tuple[ParsedToolCall, ...]


def _call_from_json(obj: object, argument_keys: tuple[str, ...]) -> ParsedToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    for key in argument_keys:
        if key in obj:
            return ParsedToolCall(obj["name"], obj[key]) if isinstance(obj[key], dict) else None
    return ParsedToolCall(obj["name"], {})


_HERMES_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_hermes(text: str) -> ParsedReply:
    calls, kept, last = [], [], 0
    for match in _HERMES_BLOCK.finditer(text):
        try:
            call = _call_from_json(json.loads(match.group(1)), ("arguments", "parameters"))
        except json.JSONDecodeError:
            call = None
        if call is None:
            continue  # a malformed block stays in the content
        calls.append(call)
        kept.append(text[last:match.start()])
        last = match.end()
    kept.append(text[last:])
    return ParsedReply("".join(kept).strip() if calls else text, tuple(calls))


def parse_llama3_json(text: str) -> ParsedReply:
    body = text.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return ParsedReply(text, ())
    calls = []
    decoder = json.JSONDecoder()
    rest = body
    while rest:
        try:
            obj, end = decoder.raw_decode(rest)
        except json.JSONDecodeError:
            return ParsedReply(text, ())
        call = _call_from_json(obj, ("parameters", "arguments"))
        if call is None:
            return ParsedReply(text, ())
        calls.append(call)
        rest = rest[end:].strip().removeprefix(";").strip()
    return ParsedReply("", tuple(calls))


def write_hermes(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def write_llama3_json(name: str, arguments: dict) -> str:
    return json.dumps({"name": name, "parameters": arguments})


@dataclass(frozen=True)
class ToolCallFormat:
    parse: Callable[[str], ParsedReply]
    write: Callable[[str, dict], str]  # one call (name, arguments) as a model trained on the format writes it


TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {
    "hermes": ToolCallFormat(parse_hermes, write_hermes),
    "llama3_json": ToolCallFormat(parse_llama3_json, write_llama3_json),
}


def parser_for_template(chat_template: str | None) -> str:
    """The parser a chat template's text implies: Llama-3 headers mean `llama3_json`; anything else
    (ChatML, Qwen's `<tool_call>` blocks) `hermes`."""
    template = chat_template or ""
    if "<tool_call>" not in template and "<|start_header_id|>" in template:
        return "llama3_json"
    return "hermes"


def get_format(name: str) -> ToolCallFormat:
    if name not in TOOL_CALL_FORMATS:
        raise ValueError(f"tool_call_parser must be one of {sorted(TOOL_CALL_FORMATS)}, got {name!r}")
    return TOOL_CALL_FORMATS[name]


def random_argument(tool: str, name: str, schema: dict, rng: random.Random) -> object:
    """A uniformly drawn value of one argument: from its `enum`, a boolean, or an integer within its
    `minimum`..`maximum`. Any other argument would need a guess about the task, which is not random."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if schema.get("type") == "boolean":
        return rng.random() < 0.5
    if schema.get("type") == "integer" and "minimum" in schema and "maximum" in schema:
        return rng.randint(schema["minimum"], schema["maximum"])
    raise ValueError(f"tool {tool!r}, argument {name!r}: a random call draws only enum, boolean or bounded integer "
                     f"arguments (this one is {schema}); give the agent's tool such arguments, or set sft_warmup.steps=0")


def random_tool_call(tools: list[dict], rng: random.Random) -> tuple[str, dict]:
    """A call of one of `tools` (OpenAI tool definitions), drawn uniformly, with its required arguments
    drawn by `random_argument`: what a policy that knows the call format but not the task would do."""
    function = rng.choice(tools)["function"]
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties", {})
    return function["name"], {name: random_argument(function["name"], name, properties.get(name, {}), rng)
                              for name in parameters.get("required", [])}
