"""Shared pieces of the bring-your-own-agent tests: chat templates that render tools and tool calls
(ChatML in Qwen2.5's style, Llama-3.1's JSON style), and a scripted policy built on a real tiny model."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.strategies.generation import GenerationRequest, GenerationResult
from tests.rollout.helpers import fresh_logprobs

# Qwen2.5's layout: tools listed in the system turn, calls as <tool_call> blocks, tool output as a
# user turn in <tool_response>. Arguments are re-serialised by tojson (spaces after ':' and ','), so a
# reply the model wrote compactly renders differently from what it generated.
CHATML_TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}"
    "You are a helpful assistant.{% endif %}\n\n# Tools\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}"
    "\n</tools>\nCall a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}{% if m.role == 'system' and loop.first %}"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for tc in m.tool_calls or [] %}{% if m.content or not loop.first %}\n{% endif %}<tool_call>\n"
    "{\"name\": \"{{ tc.function.name }}\", \"arguments\": {{ tc.function.arguments | tojson }}}\n</tool_call>{% endfor %}"
    "<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Llama-3.1's layout: tools as JSON in the system turn, a call as the whole reply
# {"name": ..., "parameters": {...}}, tool output in an `ipython` turn.
LLAMA3_TOOLS_TEMPLATE = (
    "<|begin_of_text|>{% if tools %}<|start_header_id|>system<|end_header_id|>\n\nYou may call a function. Reply with "
    "{\"name\": function name, \"parameters\": arguments}.\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}<|eot_id|>"
    "{% elif messages[0].role == 'system' %}<|start_header_id|>system<|end_header_id|>\n\n{{ messages[0].content }}<|eot_id|>{% endif %}"
    "{% for m in messages %}{% if m.role == 'system' and loop.first %}"
    "{% elif m.role == 'assistant' and m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{% for tc in m.tool_calls %}{\"name\": \"{{ tc.function.name }}\", \"parameters\": {{ tc.function.arguments | tojson }}}"
    "{% endfor %}<|eot_id|>"
    "{% elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n{{ m.content }}<|eot_id|>"
    "{% else %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

TOOL_TEMPLATES = {"qwen2": CHATML_TOOLS_TEMPLATE, "llama": LLAMA3_TOOLS_TEMPLATE}

MOVE_TOOL = {"type": "function", "function": {
    "name": "move", "description": "Move the player one cell.",
    "parameters": {"type": "object", "properties": {"direction": {"type": "string", "enum": ["Up", "Down", "Left", "Right"]}},
                   "required": ["direction"]}}}


def tool_call_text(arch: str, direction: str) -> str:
    """A call to `move` as the model writes it (compact JSON, unlike the template's tojson)."""
    if arch == "llama":
        return '{"name":"move","parameters":{"direction":"%s"}}' % direction
    return '<tool_call>\n{"name":"move","arguments":{"direction":"%s"}}\n</tool_call>' % direction


def load_with_tool_template(model_dir: Path, arch: str):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = TOOL_TEMPLATES[arch]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return tokenizer, model


class ScriptedPolicy:
    """A real tiny model made to say scripted replies: each request gets the next text of `replies`
    (tokenised, then eos) with the model's own log-probs of those tokens after that request's prompt,
    as a policy that sampled them would report. Random weights cannot write a tool call; this makes a
    policy that does, while every log-prob still comes from the model."""

    def __init__(self, model, tokenizer, replies: list[str]) -> None:
        self.model, self.tokenizer, self.replies = model, tokenizer, list(replies)
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        results = []
        for request in requests:
            self.requests.append(request)
            ids = self.tokenizer.encode(self.replies.pop(0), add_special_tokens=False) + [self.tokenizer.eos_token_id]
            logprobs = fresh_logprobs(self.model, list(request.input_ids) + ids)[len(request.input_ids):]
            results.append(GenerationResult(request.request_id, ids, [float(x) for x in logprobs], "stop"))
        return results

    def release(self, session_ids: list[str]) -> None:  # the engine contract; nothing is cached here
        pass


def assert_sample_is_exact(model, tokens, tol: float = 1e-4) -> None:
    """A fresh forward pass over the sample gives the recorded generation log-probs on every
    generated token."""
    fresh = fresh_logprobs(model, tokens.input_ids)
    mask = torch.tensor(tokens.response_mask, dtype=torch.bool)
    assert mask.any()
    recorded = torch.tensor(tokens.logprobs)
    assert torch.allclose(fresh[mask], recorded[mask], atol=tol), (fresh[mask] - recorded[mask]).abs().max()


def assert_trajectory_is_exact(model, traj, tol: float = 1e-4) -> None:
    """assert_sample_is_exact for a Trajectory (its log-probs are `infer_logprobs`)."""
    fresh = fresh_logprobs(model, traj.input_ids)
    mask = torch.tensor(traj.response_mask, dtype=torch.bool)
    assert mask.any()
    recorded = torch.tensor(traj.infer_logprobs)
    assert torch.allclose(fresh[mask], recorded[mask], atol=tol), (fresh[mask] - recorded[mask]).abs().max()
