"""Guess the number, a multi-turn dialogue env: the env answers each guess with higher/lower."""

from __future__ import annotations

import random
import re
from typing import Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.guess_number.config import GuessNumberEnvConfig

_INTEGER = re.compile(r"[+-]?\d{1,12}", re.ASCII)


class GuessNumberEnv(BaseEnv):
    """Reward 1 for the right guess (which ends the episode), ``wrong_guess_reward`` otherwise.
    A guess is effective when it is consistent with all feedback so far (it could be the secret)."""

    config_cls = GuessNumberEnvConfig
    config: GuessNumberEnvConfig

    def __init__(self, config: Optional[GuessNumberEnvConfig] = None, **config_kwargs) -> None:
        super().__init__(config, **config_kwargs)
        self.secret = 0
        self.low, self.high = self.config.min_value, self.config.max_value  # what feedback still allows
        self.guesses: list[int] = []

    def _reset(self, rng: random.Random) -> None:
        self.secret = rng.randint(self.config.min_value, self.config.max_value)
        self.low, self.high = self.config.min_value, self.config.max_value
        self.guesses = []

    def _parse_answer(self, answer: str) -> tuple[Optional[int], Optional[str]]:
        if not _INTEGER.fullmatch(answer):
            return None, f"{answer[:40]!r} is not an integer"
        guess = int(answer)
        if not self.config.min_value <= guess <= self.config.max_value:
            return None, f"{guess} is outside {self.config.min_value}..{self.config.max_value}"
        return guess, None

    def _apply(self, guess: int) -> StepOutcome:
        consistent = self.low <= guess <= self.high
        self.guesses.append(guess)
        if guess < self.secret:
            self.low = max(self.low, guess + 1)
        elif guess > self.secret:
            self.high = min(self.high, guess - 1)
        correct = guess == self.secret
        return StepOutcome(
            reward=1.0 if correct else float(self.config.wrong_guess_reward),
            terminated=correct,
            effective=consistent,
        )

    def is_success(self) -> bool:
        return bool(self.guesses) and self.guesses[-1] == self.secret

    def render(self) -> str:
        if not self.guesses:
            return f"I am thinking of an integer from {self.config.min_value} to {self.config.max_value}. Guess it."
        guess = self.guesses[-1]
        if guess == self.secret:
            return f"{guess} is correct!"
        return f"{guess} is too {'low' if guess < self.secret else 'high'}."

    def default_instruction(self) -> str:
        return (
            f"Guess the secret integer from {self.config.min_value} to {self.config.max_value}. After each guess "
            "you are told whether it is too low or too high. Find it in as few guesses as you can."
        )

    def instruction_extras(self) -> str:
        try:
            return f"Answer with one integer, e.g. {self.format_answer(str(self.config.min_value))}"
        except ValueError:
            return ""

    def random_answer(self, rng: random.Random) -> str:
        return str(rng.randint(self.config.min_value, self.config.max_value))

    def optimal_answer(self) -> Optional[str]:
        """Binary search over what the feedback still allows."""
        return str((self.low + self.high) // 2)
