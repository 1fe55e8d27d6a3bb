"""ToolEnvManager: TrajEnvManager for envs whose observations may be tool output.

Select it per env with ``env_manager_cls: roll.pipeline.agentic.env_manager.tool_env_manager.ToolEnvManager``.
Differences from TrajEnvManager:
- a step whose info says ``observation_role: tool`` puts the observation in a ``tool`` message, as
  is (no ``agent_template``); the chat template renders it (ChatML: ``<|im_start|>tool``, Qwen2.5:
  ``<tool_response>`` in a user turn). Templates that refuse a ``tool`` role get a user message.
- when the env calls tools in the native JSON format and the chat template renders ``tools=``, the
  env's function schemas are passed to the template (they appear in the system prompt).
- ROLL's ``custom_envs.<Tag>.tool_wrapper`` block, where the env spec carries one, goes to the env
  as ``env_config.tool_wrapper``.

Tool messages are prompt text like any observation: their tokens are appended with response_mask 0
and log-prob 0, so the policy is never trained on tool output; the ids stay token-exact.
"""

from __future__ import annotations

from typing import Any, Optional

from jinja2.exceptions import TemplateError

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.env_manager.chat_tokens import ChatTemplateError, ChatTokens
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager

TOOL_ROLE = "tool"


def template_renders_tools(tokenizer: Any, tools: list[dict]) -> bool:
    """Whether the chat template shows ``tools=`` (templates without a tools section ignore it)."""
    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "x"}]
    try:
        with_tools = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    except TemplateError:
        return False
    return with_tools != tokenizer.apply_chat_template(messages, tokenize=False)


class ToolChatTokens(ChatTokens):
    """ChatTokens that render with the env's tool schemas and can append ``tool`` messages."""

    def __init__(self, tokenizer: Any, tools: Optional[list[dict]] = None) -> None:
        super().__init__(tokenizer)
        self.tools = tools if tools and template_renders_tools(tokenizer, tools) else None

    def render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=self.tools, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def next_message(self, role: str, content: str) -> list[int]:
        """Ids to append for the next message of ``role`` plus the assistant header."""
        before = self.render(self.messages, generation_prompt=False)
        self.messages.append({"role": role, "content": content})
        try:
            after = self.render(self.messages, generation_prompt=True)
        except TemplateError:
            if role != TOOL_ROLE:
                raise
            self.messages[-1] = {"role": "user", "content": f"Tool output:\n{content}"}
            after = self.render(self.messages, generation_prompt=True)
        if not after.startswith(before):
            raise ChatTemplateError(f"the chat template changes earlier turns when a {role} message is added; "
                                    "multi-turn token ids cannot be kept exact")
        delta = self._pending_close + after[len(before):]
        self._pending_close = ""
        return self.encode(delta)

    def next_prompt(self, user_text: str) -> list[int]:
        return self.next_message("user", user_text)

    def drop_last_user(self) -> None:
        if self.messages and self.messages[-1]["role"] in ("user", TOOL_ROLE):
            self.messages.pop()


class ToolEnvManager(TrajEnvManager):
    def __init__(self, tag: str, env_config: CustomEnvConfig, manager_config: EnvManagerConfig, tokenizer: Any,
                 proxy: Any, sequence_length: int, env_id: int = 0, session_prefix: str = "") -> None:
        super().__init__(tag, env_config, manager_config, tokenizer, proxy, sequence_length, env_id, session_prefix)
        if env_config.tool_wrapper is not None:
            if "tool_wrapper" in self.env_kwargs:
                raise ValueError(f"custom_envs.{tag}: tool_wrapper is set both beside env_config and inside it; keep one")
            self.env_kwargs["tool_wrapper"] = env_config.tool_wrapper

    def _new_chat(self) -> ChatTokens:
        native = getattr(getattr(self.env, "config", None), "tool_call_format", None) == "json"
        return ToolChatTokens(self.tokenizer, getattr(self.env, "tool_schemas", None) if native else None)

    def _next_turn_ids(self, chat: ChatTokens, observation: str, info: dict, turn: int) -> list[int]:
        if info.get("observation_role") == TOOL_ROLE and isinstance(chat, ToolChatTokens):
            return chat.next_message(TOOL_ROLE, observation)
        return super()._next_turn_ids(chat, observation, info, turn)
