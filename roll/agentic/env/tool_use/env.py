"""A tool-using env: the model may run Python in a sandbox before it answers.

Each turn the model either calls the Python tool (its output comes back as the next observation,
marked ``info["observation_role"] = "tool"`` so the env manager renders it as a ``tool`` message)
or answers with ``<answer>integer</answer>``, which ends the episode. A turn holding both runs the
tool and ignores the answer. Rewards: ``tool_reward`` (+ ``tool_success_reward`` when the code ran
without error) for a tool turn, ``correct_reward`` / ``wrong_answer_reward`` for the answer,
``format_penalty`` for a turn with neither (or a malformed call, or a call beyond ``max_tool_uses``).
"""

from __future__ import annotations

import random
import re
from typing import Any, Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.parsing import strip_special_tokens
from roll.agentic.env.tool_use.config import ToolUseEnvConfig, ToolWrapperConfig
from roll.agentic.env.tool_use.sandbox import sandbox_prefix, sandbox_python
from roll.agentic.env.tool_use.tasks import Task, make_task
from roll.agentic.env.tool_use.tools import TOOL_SCHEMAS, call_example, find_tool_call, run_python_tool

_INTEGER = re.compile(r"[+-]?\d{1,400}", re.ASCII)
TOOL_ROLE = "tool"


class ToolUseEnv(BaseEnv):
    config_cls = ToolUseEnvConfig
    config: ToolUseEnvConfig
    extra_metrics_agg_mode = {"tool_calls": "last", "tool_errors": "last", "used_tool": "last"}

    def __init__(self, config: Optional[ToolUseEnvConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        sandbox_prefix(), sandbox_python()  # refuse now, with the reason, where no sandbox can be built
        self.task = Task("", 0)
        self.tool_calls = self.tool_errors = 0
        self.answer: Optional[int] = None

    @property
    def tools(self) -> ToolWrapperConfig:
        return self.config.tool_wrapper

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas, for chat templates that render ``tools=``."""
        return TOOL_SCHEMAS

    def _reset(self, rng: random.Random) -> None:
        self.task = make_task(self.config.task, rng, self.config.num_digits, self.config.table_rows)
        self.tool_calls = self.tool_errors = 0
        self.answer = None

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        call = None
        if isinstance(action_text, str) and self._started and not self._episode_over:
            cleaned = strip_special_tokens(action_text, self.config.special_token_list)
            call = find_tool_call(cleaned, self.config.tool_call_format)
        if call is None:
            return super().step(action_text)
        return self._tool_turn(call.code, call.error)

    def _tool_turn(self, code: Optional[str], error: Optional[str]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.num_turns += 1
        if error is None and self.tool_calls >= self.tools.max_tool_uses:
            error = f"no tool calls left (at most {self.tools.max_tool_uses} per episode); answer now"
        info: dict[str, Any] = {"invalid_reason": error, "action_content": code, "think_content": None}
        if error is not None:
            observation, reward, valid, effective = f"Tool call rejected: {error}.", self.config.format_penalty, 0.0, 0.0
        else:
            observation, result = run_python_tool(code, self.tools.limits, self.task.files, self.tools.keep_error_last_line)
            self.tool_calls += 1
            self.tool_errors += int(not result.ok)
            reward = self.tools.tool_reward + (self.tools.tool_success_reward if result.ok else 0.0)
            valid, effective = 1.0, float(result.ok)
            info.update(observation_role=TOOL_ROLE, tool_exit_code=result.exit_code, tool_timed_out=result.timed_out)
        truncated = self.num_turns >= self.config.max_steps
        self._episode_over = truncated
        info["action"] = None if error else "tool_call"
        info["metrics"] = {"action_is_valid": valid, "action_is_effective": effective, "success": 0.0, **self.state_metrics()}
        info["metrics_agg_mode"] = self.metrics_agg_mode
        return observation, float(reward), False, truncated, info

    def _parse_answer(self, answer: str) -> tuple[Optional[int], Optional[str]]:
        if not _INTEGER.fullmatch(answer.replace(",", "")):
            return None, f"{answer[:40]!r} is not an integer"
        return int(answer.replace(",", "")), None

    def _apply(self, answer: int) -> StepOutcome:
        self.answer = answer
        correct = answer == self.task.answer
        reward = self.config.correct_reward if correct else self.config.wrong_answer_reward
        return StepOutcome(reward=float(reward), terminated=True, effective=correct)

    def is_success(self) -> bool:
        return self.answer is not None and self.answer == self.task.answer

    def state_metrics(self) -> dict[str, float]:
        return {"tool_calls": float(self.tool_calls), "tool_errors": float(self.tool_errors),
                "used_tool": float(self.tool_calls > 0)}

    def render(self) -> str:
        if self.answer is None:
            return self.task.question
        return "Correct." if self.is_success() else f"Wrong: {self.answer} is not the answer."

    def default_instruction(self) -> str:
        if self.tools.max_tool_uses == 0:  # the no-tool baseline: no tool is offered
            return "Solve the task in your head: no tool is available. Answer with the integer alone."
        example = call_example(self.config.tool_call_format, "print(12345 * 6789)")
        return (
            "Solve the task. You may run Python code with the python tool: write exactly one call per turn, "
            f"e.g. {example}; what the code prints comes back to you. The code runs without network access "
            f"and may use at most {self.tools.max_tool_uses} tool calls. When you know the result, answer with "
            "the integer alone."
        )

    def instruction_extras(self) -> str:
        try:
            return f"Answer format: {self.format_answer('42')}"
        except ValueError:
            return ""

    def random_answer(self, rng: random.Random) -> str:
        return str(rng.randint(0, 10 ** (2 * self.config.num_digits)))

    def solver_call(self) -> str:
        """A tool call (in this env's call format) of Python that computes the task's answer from what
        the question states (tasks.py): the number comes only from running it (the scripted tool
        policy, policies.py)."""
        return call_example(self.config.tool_call_format, self.task.solver_code)

    def optimal_answer(self) -> Optional[str]:
        """An oracle: the task's answer (the env knows it; a policy would compute it with the tool)."""
        return str(self.task.answer)
