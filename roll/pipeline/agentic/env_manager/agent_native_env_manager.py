"""AgentNativeStepEnvManager (ROLL's name and class path): one training sample per turn, whose prompt
is the chat the env keeps itself (``env.chat_messages()``: ``sokoban_native_env``), rendered by the
chat template as it is; the config's agent templates are not used (ROLL's native configs leave them as
placeholders). Everything else is StepEnvManager's: the samples, their step rewards and state keys,
the step-level estimators (``adv_estimator: step_reinforce``)."""

from __future__ import annotations

from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager


class AgentNativeStepEnvManager(StepEnvManager):
    def turn_messages(self, instruction: str, observation: str, turn: int,
                      history: list[tuple[int, str, str]]) -> list[dict[str, str]]:
        chat_messages = getattr(self.env, "chat_messages", None)
        if not callable(chat_messages):
            raise ValueError(f"custom_envs.{self.tag}: AgentNativeStepEnvManager needs an env that keeps its own chat "
                             f"(a chat_messages() method, as sokoban_native_env has); env_type "
                             f"{self.spec.env_type!r} has none: use StepEnvManager or TrajEnvManager")
        return chat_messages()
