"""``env_type: tool_use`` settings, including ROLL's ``tool_wrapper`` block.

ROLL writes the tools of an env as ``custom_envs.<Tag>.tool_wrapper`` (beside ``env_config``)::

    tool_wrapper:
      wrapper_args: {tool_reward: 0, tool_success_reward: 0.1, max_tool_uses: 3}
      tool_configs:
        - tool_id: python_code
          tool_args: {timeout: 5, sandbox_type: none, keep_error_last_line: false}

roll reads the same block there (the tool env manager hands it to the env) or as
``env_config.tool_wrapper``. ``python_code`` is the one tool roll ships; its ``tool_args`` may also set
``memory_mb``, ``workdir_mb`` and ``max_output_chars``. ``sandbox_type`` is accepted for ROLL's configs
and ignored: roll always runs the code in its namespace sandbox (sandbox.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

from roll.agentic.env.base import BaseEnvConfig, config_error, require_int, require_number
from roll.agentic.env.tool_use.sandbox import SandboxLimits
from roll.agentic.env.tool_use.tasks import TASKS
from roll.agentic.env.tool_use.tools import TOOL_CALL_FORMATS

PYTHON_TOOL_ID = "python_code"
_WRAPPER_KEYS = ("tool_reward", "tool_success_reward", "max_tool_uses")
_PYTHON_TOOL_ARGS = ("timeout", "memory_mb", "workdir_mb", "max_output_chars", "keep_error_last_line", "sandbox_type")


@dataclass(frozen=True)
class ToolWrapperConfig:
    """tool_reward: reward of a turn that calls a tool; tool_success_reward: added when the code ran
    without error; max_tool_uses: tool calls per episode (a call beyond it is a format error)."""

    tool_reward: float = 0.0
    tool_success_reward: float = 0.0
    max_tool_uses: int = 3
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    keep_error_last_line: bool = False  # show only the exception line of a traceback


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise config_error(where, f"expected a mapping, got {value!r}")
    return value


def parse_tool_wrapper(value: Any) -> ToolWrapperConfig:
    """ROLL's ``tool_wrapper`` mapping (or None: defaults) -> ToolWrapperConfig, every key checked."""
    if isinstance(value, ToolWrapperConfig):
        return value
    block = _mapping(value, "tool_wrapper")
    unknown = set(block) - {"wrapper_args", "tool_configs"}
    if unknown:
        raise config_error("tool_wrapper", f"unknown keys {sorted(unknown)}; valid: wrapper_args, tool_configs")
    wrapper = _mapping(block.get("wrapper_args"), "tool_wrapper.wrapper_args")
    unknown = set(wrapper) - set(_WRAPPER_KEYS)
    if unknown:
        raise config_error("tool_wrapper.wrapper_args", f"unknown keys {sorted(unknown)}; valid: {', '.join(_WRAPPER_KEYS)}")
    for key in ("tool_reward", "tool_success_reward"):
        require_number(wrapper.get(key, 0.0), f"tool_wrapper.wrapper_args.{key}")
    require_int(wrapper.get("max_tool_uses", 3), "tool_wrapper.wrapper_args.max_tool_uses", minimum=0)

    tools = block.get("tool_configs") or [{"tool_id": PYTHON_TOOL_ID}]
    if not isinstance(tools, list) or len(tools) != 1 or not isinstance(tools[0], dict):
        raise config_error("tool_wrapper.tool_configs", f"expected a list with one tool ({PYTHON_TOOL_ID}), got {tools!r}")
    tool_id = tools[0].get("tool_id")
    if tool_id != PYTHON_TOOL_ID:
        raise config_error("tool_wrapper.tool_configs", f"tool_id {tool_id!r} is not available; roll ships only {PYTHON_TOOL_ID!r}")
    args = _mapping(tools[0].get("tool_args"), "tool_wrapper.tool_configs[0].tool_args")
    unknown = set(args) - set(_PYTHON_TOOL_ARGS)
    if unknown:
        raise config_error("tool_wrapper.tool_configs[0].tool_args", f"unknown keys {sorted(unknown)}; valid: {', '.join(_PYTHON_TOOL_ARGS)}")
    require_number(args.get("timeout", 5.0), "tool_wrapper.tool_configs[0].tool_args.timeout")
    limit_fields = {f.name for f in fields(SandboxLimits)}
    limit_values = {key: value for key, value in args.items() if key in limit_fields}
    if "timeout" in args:
        limit_values["timeout_s"] = float(args["timeout"])
    try:
        limits = SandboxLimits(**limit_values)
    except ValueError as exc:
        raise config_error("tool_wrapper.tool_configs[0].tool_args", str(exc)) from None
    return ToolWrapperConfig(
        tool_reward=float(wrapper.get("tool_reward", 0.0)),
        tool_success_reward=float(wrapper.get("tool_success_reward", 0.0)),
        max_tool_uses=int(wrapper.get("max_tool_uses", 3)),
        limits=limits,
        keep_error_last_line=bool(args.get("keep_error_last_line", False)),
    )


@dataclass
class ToolUseEnvConfig(BaseEnvConfig):
    """task: multiplication | table_lookup (tasks.py).
    tool_call_format: tagged (<python>..</python>) | json (<tool_call>{..}</tool_call>, the native format).
    num_digits: digits of each factor (multiplication); table_rows: rows of inventory.csv (table_lookup).
    max_steps: turns per episode, tool calls included. correct_reward / wrong_answer_reward: reward
    of the final answer. tool_wrapper: ROLL's block (see the module doc)."""

    task: str = "multiplication"
    tool_call_format: str = "tagged"
    num_digits: int = 12
    table_rows: int = 20
    max_steps: int = 4
    correct_reward: float = 1.0
    wrong_answer_reward: float = 0.0
    tool_wrapper: Optional[Any] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.describe_last_move:
            raise config_error("describe_last_move", "a tool-use episode's prompt keeps the whole conversation, "
                               "every call and answer included; leave it false")
        if self.task not in TASKS:
            raise config_error("task", f"must be one of {list(TASKS)}, got {self.task!r}")
        if self.tool_call_format not in TOOL_CALL_FORMATS:
            raise config_error("tool_call_format", f"must be one of {list(TOOL_CALL_FORMATS)}, got {self.tool_call_format!r}")
        require_int(self.num_digits, "num_digits", minimum=1)
        if self.num_digits > 200:
            raise config_error("num_digits", f"must be <= 200, got {self.num_digits}")
        require_int(self.table_rows, "table_rows", minimum=1)
        require_number(self.correct_reward, "correct_reward")
        require_number(self.wrong_answer_reward, "wrong_answer_reward")
        self.tool_wrapper = parse_tool_wrapper(self.tool_wrapper)
