"""StepConcatEnvManager: StepEnvManager whose {history} is the earlier observations alone.

ROLL's variant for envs whose observations already tell the story (GEM's concatenating wrappers):
the last ``history_length`` observations, one per line, without the replies. Everything else (one
sample per turn, exact ids, state keys, template fields) is StepEnvManager's.
Select it with ``env_manager_cls: roll.pipeline.agentic.env_manager.step_concat_env_manager.StepConcatEnvManager``.
"""

from __future__ import annotations

from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager


class StepConcatEnvManager(StepEnvManager):
    def history_text(self, pairs: list[tuple[int, str, str]]) -> str:
        return "\n".join(observation for _, observation, _ in pairs)
