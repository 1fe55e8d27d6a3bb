"""Countdown, a single-turn env: combine the given numbers with + - * / to hit the target."""

from __future__ import annotations

import random
from collections import Counter
from typing import Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.countdown.arith import Evaluated, ExpressionError, evaluate
from roll.agentic.env.countdown.config import CountdownEnvConfig

_MAX_PUZZLE_DRAWS = 1000


def _random_solution(numbers: list[int], rng: random.Random) -> tuple[int, str]:
    """Combine all numbers in random order and grouping, keeping every intermediate value a
    positive integer (so the puzzle reads as classic Countdown); returns (value, expression)."""
    items = [(n, str(n)) for n in numbers]
    rng.shuffle(items)
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (a, ea), (b, eb) = items[i], items[j]
        options = [(a + b, f"{ea} + {eb}"), (a * b, f"{ea} * {eb}")]
        if a > b:
            options.append((a - b, f"{ea} - {eb}"))
        if b > 1 and a % b == 0:
            options.append((a // b, f"{ea} / {eb}"))
        value, text = rng.choice(options)
        items = [item for k, item in enumerate(items) if k not in (i, j)] + [(value, f"({text})")]
    value, text = items[0]
    return value, text[1:-1]  # the last combination wrapped the whole expression in parentheses


class CountdownEnv(BaseEnv):
    """Reward 1 for an expression that uses the numbers as the rules say and equals the target,
    ``wrong_answer_reward`` for any other well-formed expression; either ends the episode."""

    config_cls = CountdownEnvConfig
    config: CountdownEnvConfig

    def __init__(self, config: Optional[CountdownEnvConfig] = None, **config_kwargs) -> None:
        super().__init__(config, **config_kwargs)
        self.numbers: list[int] = []
        self.target = 0
        self.solution = ""
        self.answered: Optional[Evaluated] = None
        self._solved = False

    def _reset(self, rng: random.Random) -> None:
        cfg = self.config
        for _ in range(_MAX_PUZZLE_DRAWS):
            numbers = [rng.randint(cfg.min_number, cfg.max_number) for _ in range(cfg.num_numbers)]
            target, solution = _random_solution(numbers, rng)
            if 1 <= target <= cfg.max_target:
                break
        else:
            raise ValueError(f"no Countdown target <= {cfg.max_target} in {_MAX_PUZZLE_DRAWS} draws; raise max_target")
        self.numbers, self.target, self.solution = numbers, target, solution
        self.answered, self._solved = None, False

    def _parse_answer(self, answer: str) -> tuple[Optional[Evaluated], Optional[str]]:
        try:
            return evaluate(answer), None
        except ExpressionError as exc:
            return None, f"not an arithmetic expression: {exc}"

    def _uses_numbers_legally(self, used: tuple[int, ...]) -> bool:
        given, taken = Counter(self.numbers), Counter(used)
        if self.config.use_all_numbers:
            return taken == given
        return all(taken[n] <= given[n] for n in taken)

    def _apply(self, action: Evaluated) -> StepOutcome:
        legal = self._uses_numbers_legally(action.numbers)
        self.answered = action
        self._solved = legal and action.value == self.target
        return StepOutcome(
            reward=1.0 if self._solved else float(self.config.wrong_answer_reward),
            terminated=True,
            effective=legal,
            info={"answer_value": float(action.value)},
        )

    def is_success(self) -> bool:
        return self._solved

    def render(self) -> str:
        text = f"Numbers: {self.numbers}\nTarget: {self.target}"
        if self.answered is not None:
            text += f"\nYour expression equals {float(self.answered.value):g}."
        return text

    def default_instruction(self) -> str:
        rule = "exactly once" if self.config.use_all_numbers else "at most once"
        return (
            "You are playing Countdown. Combine the given numbers with +, -, *, / and parentheses so that the "
            f"expression equals the target. Use each given number {rule}. Answer with the expression only, "
            "for example (3 + 5) * 2."
        )

    def instruction_extras(self) -> str:
        try:
            return f"Answer format: {self.format_answer('(3 + 5) * 2')}"
        except ValueError:
            return ""

    def random_answer(self, rng: random.Random) -> str:
        """A well-formed expression over the numbers in random order with + - * (never / 0)."""
        order = rng.sample(self.numbers, len(self.numbers))
        parts = [str(order[0])]
        for number in order[1:]:
            parts += [rng.choice("+-*"), str(number)]
        return " ".join(parts)

    def optimal_answer(self) -> Optional[str]:
        return self.solution or None
