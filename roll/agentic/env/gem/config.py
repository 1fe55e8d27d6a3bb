"""``env_type: gem`` settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roll.agentic.env.base import BaseEnvConfig, config_error, require_number

# GEM parses the last \boxed{...} itself; roll only checks that there is one (else: format penalty,
# state unchanged) and hands GEM the whole text.
BOXED_PATTERN = r"^(.*\\boxed\{.+\}.*)$"


@dataclass
class GemEnvConfig(BaseEnvConfig):
    """gem_id: a GEM env id (``game:TowerofHanoi-v0-easy``, ``rg:leg_counting``...), or ROLL's
    ``game:<Name>-v0`` form (GEM 0.0.4 ids): the ``game:<Name>-v0-*`` class with its own defaults.
    gem_kwargs: keyword arguments for the GEM env (override the id's registered ones), e.g.
    ``{min_number: 1, max_number: 20, max_turns: 10}`` as ROLL's configs write them in env_config.
    success_reward: a step whose GEM reward reaches it and ends the episode counts as solved.
    action_pattern: must find the answer text containing \\boxed{}; the default takes the whole reply."""

    gem_id: str = ""
    gem_kwargs: dict[str, Any] = field(default_factory=dict)
    action_pattern: str = BOXED_PATTERN
    max_steps: int = 10
    success_reward: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.gem_id, str) or ":" not in self.gem_id:
            raise config_error("gem_id", f"expected a GEM env id such as 'game:TowerofHanoi-v0-easy' or 'rg:leg_counting', got {self.gem_id!r}")
        if not isinstance(self.gem_kwargs, dict) or not all(isinstance(k, str) for k in self.gem_kwargs):
            raise config_error("gem_kwargs", f"expected a mapping of keyword arguments, got {self.gem_kwargs!r}")
        require_number(self.success_reward, "success_reward")
