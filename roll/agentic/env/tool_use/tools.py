"""Tool calls in model text, and the Python tool that runs them in the sandbox.

Two call formats (``tool_call_format``):
- ``tagged``: ``<python>print(2 + 2)</python>``.
- ``json``: ``<tool_call>{"name": "python", "arguments": {"code": "print(2 + 2)"}}</tool_call>``, the
  function-call format that Qwen2.5 / Hermes chat templates teach (``"parameters"`` is accepted for
  ``"arguments"``, as Llama 3.1 writes it). Templates that render ``tools=`` show ``TOOL_SCHEMAS``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from roll.agentic.env.tool_use.sandbox import SandboxLimits, SandboxResult, run_python

TOOL_CALL_FORMATS = ("tagged", "json")
PYTHON_TOOL_NAME = "python"
_TAGS = {"tagged": ("<python>", "</python>"), "json": ("<tool_call>", "</tool_call>")}
MAX_CODE_CHARS = 20_000

# OpenAI-style function schema, passed to chat templates that render a tools section
TOOL_SCHEMAS: list[dict[str, Any]] = [{
    "type": "function",
    "function": {
        "name": PYTHON_TOOL_NAME,
        "description": "Run Python 3 code in a sandbox (no network; files only in the current directory) "
                       "and return what it prints.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The program; print the values you need."}},
            "required": ["code"],
        },
    },
}]


@dataclass(frozen=True)
class ToolCall:
    """A tool call found in model text: the code to run, or why the call is malformed."""

    code: Optional[str]
    error: Optional[str] = None


def find_tool_call(text: str, call_format: str) -> Optional[ToolCall]:
    """The first tool call in ``text``, None if it holds none. Only one call runs per turn."""
    body = _first_tagged(text, *_TAGS[call_format])
    if body is None or call_format == "tagged":
        return None if body is None else _checked(body)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return ToolCall(None, f"the tool call is not valid JSON ({str(exc)[:80]})")
    if not isinstance(payload, dict) or payload.get("name") != PYTHON_TOOL_NAME:
        return ToolCall(None, f'the tool call must name the tool: {{"name": "{PYTHON_TOOL_NAME}", "arguments": {{"code": ...}}}}')
    arguments = payload.get("arguments", payload.get("parameters"))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = None
    if not isinstance(arguments, dict) or not isinstance(arguments.get("code"), str):
        return ToolCall(None, 'the tool call needs "arguments": {"code": "<python source>"}')
    return _checked(arguments["code"])


def _first_tagged(text: str, open_tag: str, close_tag: str) -> Optional[str]:
    """Text between the first open tag and the next close tag (str.find: linear on any input)."""
    start = text.find(open_tag)
    if start < 0:
        return None
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else text[start + len(open_tag):end]


def _checked(code: str) -> ToolCall:
    if not code.strip():
        return ToolCall(None, "the tool call holds no code")
    if len(code) > MAX_CODE_CHARS:
        return ToolCall(None, f"the code is longer than {MAX_CODE_CHARS} characters")
    return ToolCall(code)


def call_example(call_format: str, code: str) -> str:
    """How the model writes a call to the Python tool in ``call_format``."""
    if call_format == "tagged":
        return f"<python>{code}</python>"
    return "<tool_call>" + json.dumps({"name": PYTHON_TOOL_NAME, "arguments": {"code": code}}) + "</tool_call>"


def run_python_tool(code: str, limits: SandboxLimits, files: dict[str, str], keep_error_last_line: bool) -> tuple[str, SandboxResult]:
    """Run the code; returns (the text the model sees, the raw result)."""
    result = run_python(code, limits, files)
    output = result.output.rstrip("\n")
    if not result.ok and keep_error_last_line and not result.timed_out:
        lines = [line for line in output.splitlines() if line.strip()]
        output = lines[-1] if lines else output  # the exception line of the traceback
    if not output:
        output = "(no output; print the values you need)" if result.ok else f"(exited with code {result.exit_code})"
    return output, result
