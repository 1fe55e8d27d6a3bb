"""Math, QA and code tasks from a local data file: one question per episode, one reply answers it
(reward 1 when right, else 0; a reply without an answer costs ``format_penalty``, 0 by default as in
ROLL). The episode seed picks the record, so the same seed asks the same question."""

from __future__ import annotations

import random
from abc import abstractmethod
from typing import Any, ClassVar, Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.dataset_task.config import CodeTaskConfig, DatasetTaskConfig, MathTaskConfig, QaTaskConfig
from roll.agentic.env.dataset_task.data import load_records
from roll.agentic.env.dataset_task.scoring import (
    code_passes,
    exact_match,
    last_answer_tag,
    last_boxed,
    last_code_block,
    math_equal,
)
from roll.agentic.env.tool_use.sandbox import SandboxLimits


class DatasetTaskEnv(BaseEnv):
    config_cls: ClassVar[type[DatasetTaskConfig]] = DatasetTaskConfig
    config: DatasetTaskConfig
    target_key: ClassVar[str] = "answer_key"  # the config field naming the column scored against

    def __init__(self, config: Optional[DatasetTaskConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        keys = (self.config.question_key, getattr(self.config, self.target_key))
        self.records = load_records(self.config.dataset_name, self.config.split, keys)
        self.record: dict[str, Any] = {}
        self.solved = False
        self.answered = False

    def _reset(self, rng: random.Random) -> None:
        index = random.Random(f"{self.config.seed}:{rng.getrandbits(64)}").randrange(len(self.records))
        self.record = self.records[index]
        self.solved = self.answered = False

    @property
    def target(self) -> Any:
        return self.record[getattr(self.config, self.target_key)]

    def question(self) -> str:
        return str(self.record[self.config.question_key])

    def render(self) -> str:
        return "Answered." if self.answered else self.question()

    def is_success(self) -> bool:
        return self.solved

    def _apply(self, answer: str) -> StepOutcome:
        self.solved = bool(self.is_correct(answer))
        self.answered = True
        return StepOutcome(reward=1.0 if self.solved else 0.0, terminated=True, effective=True)

    @abstractmethod
    def is_correct(self, answer: str) -> bool:
        """Whether the parsed answer is right for the current record."""

    def instruction_extras(self) -> str:
        return ""


class MathTaskEnv(DatasetTaskEnv):
    """``roll_math``: the reply's last ``\\boxed{}`` against the answer column, by math-verify."""

    config_cls = MathTaskConfig

    def _parse_answer(self, answer: str) -> tuple[Optional[str], Optional[str]]:
        boxed = last_boxed(answer)
        return (boxed, None) if boxed else (None, "no \\boxed{...} answer")

    def is_correct(self, answer: str) -> bool:
        return math_equal(answer, self.target)

    def default_instruction(self) -> str:
        return "Solve the problem. Put the final answer in \\boxed{}."

    def random_answer(self, rng: random.Random) -> str:
        return f"\\boxed{{{rng.randint(0, 100)}}}"


class QaTaskEnv(DatasetTaskEnv):
    """``roll_qa``: the reply's last ``<answer>`` (or ``\\boxed{}``) against the answer column (one
    answer or a list), equal after normalisation: case, punctuation, articles and spaces ignored."""

    config_cls = QaTaskConfig

    def question(self) -> str:
        return ("Think the question through inside <think> </think>, then give only the final answer inside "
                f"<answer> </answer>.\n\nQuestion: {super().question()}")

    def _parse_answer(self, answer: str) -> tuple[Optional[str], Optional[str]]:
        found = last_boxed(answer) if self.config.extract_boxed else last_answer_tag(answer)
        return (found, None) if found else (None, "no answer found")

    def is_correct(self, answer: str) -> bool:
        return exact_match(answer, self.target)

    def default_instruction(self) -> str:
        return "Answer the question."

    def random_answer(self, rng: random.Random) -> str:
        word = rng.choice(["yes", "no", "Paris", "42"])
        return f"\\boxed{{{word}}}" if self.config.extract_boxed else f"<answer>{word}</answer>"


class CodeTaskEnv(DatasetTaskEnv):
    """``roll_code``: the reply's last code block runs on each test input in roll's namespace sandbox;
    right when every test prints its expected output."""

    config_cls = CodeTaskConfig
    config: CodeTaskConfig
    target_key = "test_key"

    def _parse_answer(self, answer: str) -> tuple[Optional[str], Optional[str]]:
        code = last_code_block(answer)
        return (code, None) if code else (None, "no ``` code block")

    def is_correct(self, code: str) -> bool:
        limits = SandboxLimits(timeout_s=float(self.config.timeout), memory_mb=self.config.memory_mb,
                               max_output_chars=1_000_000)
        return code_passes(code, self.target, self.config.max_tests, limits)

    def default_instruction(self) -> str:
        return "Write a Python 3 program that reads standard input and prints the answer, in one ```python code block."

    def random_answer(self, rng: random.Random) -> str:
        return f"```python\nprint({rng.randint(0, 9)})\n```"
