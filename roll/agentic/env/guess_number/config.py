"""Guess-the-number settings: ``custom_envs.<Tag>.env_config`` keys for ``env_type: guess_number``."""

from __future__ import annotations

from dataclasses import dataclass

from roll.agentic.env.base import BaseEnvConfig, config_error, require_int, require_number


@dataclass
class GuessNumberEnvConfig(BaseEnvConfig):
    """min_value/max_value: the secret is drawn uniformly from this range (inclusive).
    max_steps: guesses allowed (binary search needs ceil(log2(range size + 1))).
    wrong_guess_reward: reward for each wrong guess (e.g. -0.05 to reward finding it sooner)."""

    max_steps: int = 10
    min_value: int = 1
    max_value: int = 100
    wrong_guess_reward: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int(self.min_value, "min_value")
        require_int(self.max_value, "max_value")
        if self.max_value <= self.min_value:
            raise config_error("max_value", f"must exceed min_value ({self.min_value}), got {self.max_value}")
        if self.max_value - self.min_value > 10**9:
            raise config_error("max_value", "the range may span at most 10**9 numbers")
        require_number(self.wrong_guess_reward, "wrong_guess_reward")
