"""Countdown settings: ``custom_envs.<Tag>.env_config`` keys for ``env_type: countdown``."""

from __future__ import annotations

from dataclasses import dataclass

from roll.agentic.env.base import BaseEnvConfig, config_error, require_bool, require_int, require_number


@dataclass
class CountdownEnvConfig(BaseEnvConfig):
    """num_numbers: how many numbers are given; min_number/max_number: their range; max_target:
    largest target drawn. use_all_numbers: the answer must use every number exactly once (else at
    most once). wrong_answer_reward: reward for a well-formed expression that misses the target.
    One answer per episode (max_steps 1): it is single-turn."""

    max_steps: int = 1
    num_numbers: int = 4
    min_number: int = 1
    max_number: int = 100
    max_target: int = 1000
    use_all_numbers: bool = True
    wrong_answer_reward: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int(self.num_numbers, "num_numbers", minimum=2)
        if self.num_numbers > 6:
            raise config_error("num_numbers", f"at most 6 (the expression grows fast), got {self.num_numbers}")
        require_int(self.min_number, "min_number", minimum=1)
        require_int(self.max_number, "max_number", minimum=self.min_number)
        require_int(self.max_target, "max_target", minimum=1)
        require_bool(self.use_all_numbers, "use_all_numbers")
        require_number(self.wrong_answer_reward, "wrong_answer_reward")
