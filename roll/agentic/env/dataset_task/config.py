"""``env_config`` of the dataset tasks, with the keys ROLL's GEM env configs write (``dataset_name``,
``split``, ``question_key``, ``answer_key``, ``test_key``, ``seed``...), ``dataset_name`` being a local
file here (data.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from roll.agentic.env.base import BaseEnvConfig, config_error, require_bool, require_int, require_number
from roll.agentic.env.dataset_task.data import resolve_data_file

# The whole reply, when it holds the marker of an answer; the last answer is taken from it (as ROLL
# does), where roll's action_pattern would refuse a reply with two matches.
MATH_REPLY_PATTERN = r"^(.*\\boxed\{.+\}.*)$"
QA_REPLY_PATTERN = r"^(.*<answer>.*</answer>.*)$"
CODE_REPLY_PATTERN = r"^(.*```.*\n.*```.*)$"


@dataclass
class DatasetTaskConfig(BaseEnvConfig):
    """dataset_name: a local .parquet or .jsonl file, or a folder holding ``<split>.parquet`` /
    ``<split>.jsonl``. split: that file's name in a folder (default ``train``). question_key: the
    column shown to the model. seed: mixed into each episode's choice of record (ROLL's shuffle seed).
    max_steps: 1 (one reply answers; ROLL's envs end the episode on the first reply)."""

    dataset_name: str = ""
    split: Optional[str] = None
    question_key: str = "problem"
    seed: int = 0
    max_steps: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.dataset_name, str) or not self.dataset_name:
            raise config_error("dataset_name", f"expected the path of a local .parquet or .jsonl file, got {self.dataset_name!r}")
        if self.split is not None and not isinstance(self.split, str):
            raise config_error("split", f"expected a name such as 'train', got {self.split!r}")
        if not isinstance(self.question_key, str) or not self.question_key:
            raise config_error("question_key", f"expected a column name, got {self.question_key!r}")
        require_int(self.seed, "seed")
        resolve_data_file(self.dataset_name, self.split)  # a hub name fails here, naming the dataset


@dataclass
class MathTaskConfig(DatasetTaskConfig):
    """answer_key: the column of the reference answer (a string or a list of accepted ones)."""

    answer_key: str = "answer"
    action_pattern: str = MATH_REPLY_PATTERN


@dataclass
class QaTaskConfig(DatasetTaskConfig):
    """extract_boxed: read the answer from the last ``\\boxed{}`` instead of the last ``<answer>``."""

    question_key: str = "question"
    answer_key: str = "answer"
    extract_boxed: bool = False
    action_pattern: str = QA_REPLY_PATTERN

    def __post_init__(self) -> None:
        require_bool(self.extract_boxed, "extract_boxed")
        if self.extract_boxed and self.action_pattern == QA_REPLY_PATTERN:
            self.action_pattern = MATH_REPLY_PATTERN
        super().__post_init__()


@dataclass
class CodeTaskConfig(DatasetTaskConfig):
    """test_key: the column of the tests, ``{"inputs": [...], "outputs": [...]}``. max_tests: tests run
    per reply (the longest inputs first). timeout: seconds per test run in the sandbox. sandbox_type:
    ROLL's key, accepted and ignored: the code always runs in roll's namespace sandbox."""

    test_key: str = "tests"
    max_tests: int = 12
    timeout: float = 5.0
    memory_mb: int = 512
    sandbox_type: str = "none"
    action_pattern: str = CODE_REPLY_PATTERN

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int(self.max_tests, "max_tests", minimum=1)
        require_number(self.timeout, "timeout")
        if not self.timeout > 0:
            raise config_error("timeout", f"must be > 0 seconds, got {self.timeout}")
        require_int(self.memory_mb, "memory_mb", minimum=64)
