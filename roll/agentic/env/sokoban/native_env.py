"""``sokoban_native_env``: ROLL's Sokoban for its agent-native env manager, where the env keeps the
whole chat itself (ROLL's AgentNativeStepEnvManager feeds the env's messages to the model as they
are, and its configs leave the agent templates as placeholders).

The game is ``sokoban``'s. ``chat_messages()`` is the conversation so far: a system message
(``system_template`` and the env instruction), a user message with the state and
``observation_suffix``, then per turn the reply as the env received it and the next state (after a
reply with no valid action, led by a line saying so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from roll.agentic.env.base import config_error
from roll.agentic.env.sokoban.config import SokobanEnvConfig
from roll.agentic.env.sokoban.env import SokobanEnv

DEFAULT_SYSTEM = "You're a helpful assistant. You play games well and aim for the highest reward."
INVALID_REPLY_LINE = "Your last reply held no valid action; answer exactly in the format asked."


@dataclass
class SokobanNativeConfig(SokobanEnvConfig):
    """system_template: opens the system message (None: a short default). observation_suffix: follows
    every state (None: the answer format and the action names)."""

    system_template: Optional[str] = None
    observation_suffix: Optional[str] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("system_template", "observation_suffix"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise config_error(name, f"expected a string, got {getattr(self, name)!r}")


class SokobanNativeEnv(SokobanEnv):
    config_cls = SokobanNativeConfig
    config: SokobanNativeConfig

    def __init__(self, config: Optional[SokobanNativeConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        self.messages: list[dict[str, str]] = []

    def _suffix(self) -> str:
        if self.config.observation_suffix is not None:
            return self.config.observation_suffix
        return (f"Answer with one action inside <answer></answer> and nothing else, e.g. "
                f"{self.format_answer(self.action_names()[-1])}. Actions: {', '.join(self.action_names())}.\n"
                "Your next action:")

    def reset(self, seed: Optional[int] = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed)
        system = self.config.system_template if self.config.system_template is not None else DEFAULT_SYSTEM
        self.messages = [{"role": "system", "content": f"{system}\n\n{info['env_instruction']}"},
                         {"role": "user", "content": f"Here is the current state:\n{observation}\n\n{self._suffix()}"}]
        return observation, info

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action_text)
        lead = "" if info["action"] is not None else INVALID_REPLY_LINE + "\n\n"
        self.messages += [{"role": "assistant", "content": action_text},
                          {"role": "user", "content": f"{lead}Current state:\n{observation}\n\n{self._suffix()}"}]
        return observation, reward, terminated, truncated, info

    def chat_messages(self) -> list[dict[str, str]]:
        """The conversation so far, ending with the user message the next reply answers."""
        return [dict(message) for message in self.messages]
