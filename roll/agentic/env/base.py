"""The environment contract: ``reset(seed) -> (obs, info)`` and ``step(text) -> (obs, r, term, trunc, info)``.

``BaseEnv.step`` owns everything every env must do the same way (parse the model's text, charge the
format penalty for unusable text without touching the game state, count turns against
``max_steps``, report metrics); a concrete env only says how to build a game from a seed, which
answers are legal, and what a legal answer does.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from roll.agentic.env.parsing import (
    DEFAULT_ACTION_PATTERN,
    compile_action_pattern,
    match_action_name,
    parse_model_text,
)

# How the metrics every env reports combine over an episode (the env manager reads this).
BASE_METRICS_AGG_MODE: dict[str, str] = {
    "action_is_valid": "mean",
    "action_is_effective": "mean",
    "success": "last",
}
AGG_MODES = ("mean", "sum", "last", "max")
RENDER_MODES = ("text", "rgb_array")


def config_error(field_name: str, message: str) -> ValueError:
    return ValueError(f"env_config.{field_name}: {message}")


def require_int(value: Any, field_name: str, minimum: Optional[int] = None) -> None:
    """Config check shared by the env configs: a real int (YAML ``4.0`` or ``true`` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise config_error(field_name, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise config_error(field_name, f"must be >= {minimum}, got {value}")


def require_bool(value: Any, field_name: str) -> None:
    """A YAML true/false (the string "yes" or the number 1 is a mistake)."""
    if not isinstance(value, bool):
        raise config_error(field_name, f"expected true/false, got {value!r}")


def require_number(value: Any, field_name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise config_error(field_name, f"expected a number, got {value!r}")


def require_cell_separator(value: Any) -> None:
    """The grid envs' ``cell_separator``: text between the cells of a row, so it must stay on one line."""
    if not isinstance(value, str) or "\n" in value:
        raise config_error("cell_separator", f"expected a one-line string such as ' ', got {value!r}")


PROGRESS_MEASURES = ("manhattan", "path")  # the grid envs' progress_measure: see their configs


def require_progress_measure(value: Any) -> None:
    if value not in PROGRESS_MEASURES:
        raise config_error("progress_measure", f"expected one of {list(PROGRESS_MEASURES)}, got {value!r}")


def int_keyed_lookup(value: Any, field_name: str, expected_keys: Optional[list[int]] = None) -> dict[int, str]:
    """Normalise a YAML lookup table such as ``grid_lookup: {0: "#", 1: "_"}``: keys may arrive as
    ints or digit strings; every expected key must be present and the strings must be distinct
    (a render that two cells share could not be read back)."""
    if not isinstance(value, dict):
        raise config_error(field_name, f"expected a mapping, got {value!r}")
    table: dict[int, str] = {}
    for key, item in value.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise config_error(field_name, f"keys must be integers, got {key!r}") from None
        if not isinstance(item, str) or not item:
            raise config_error(field_name, f"entry {index} must be a non-empty string, got {item!r}")
        table[index] = item
    if expected_keys is not None and sorted(table) != sorted(expected_keys):
        raise config_error(field_name, f"needs exactly the keys {sorted(expected_keys)}, got {sorted(table)}")
    if len(set(table.values())) != len(table):
        raise config_error(field_name, f"entries must be distinct, got {list(table.values())}")
    return table


def check_vocab(vocab: Any, symbols: list[str], field_name: str) -> dict[str, str]:
    """``grid_vocab`` explains symbols to the model; one for a symbol that is never drawn is a typo."""
    if vocab is None:
        return {}
    if not isinstance(vocab, dict):
        raise config_error(field_name, f"expected a mapping symbol -> meaning, got {vocab!r}")
    for symbol, meaning in vocab.items():
        if symbol not in symbols:
            raise config_error(field_name, f"symbol {symbol!r} is not drawn by grid_lookup ({symbols})")
        if not isinstance(meaning, str):
            raise config_error(field_name, f"meaning of {symbol!r} must be a string, got {meaning!r}")
    return dict(vocab)


@dataclass
class BaseEnvConfig:
    """Fields every env accepts under ``custom_envs.<Tag>.env_config``.

    env_instruction: the rules shown to the model once; None uses the env's own text.
    action_pattern: regex that finds the answer in the model's text (one group: the answer; two: think
        and answer, e.g. ``<think>(.*?)</think>\\s*<answer>(.*?)</answer>``).
    format_penalty: reward for a turn whose text has no usable answer (the state does not change).
    ineffective_penalty: added to the reward of a valid turn that changed nothing (the env reports it
        as `action_is_effective` 0: FrozenLake's move into the edge, Sokoban's push into a wall). roll's
        key, 0 by default: without it such moves cost nothing, a plateau a policy can sit on.
    max_steps: turns per episode, valid or not; the turn that reaches it ends with ``truncated=True``.
    special_token_list: extra chat tokens to delete before parsing (common ones are always removed).
    describe_last_move: roll's key, default false (ROLL has no such line): append to each observation
        after the first a line naming the last turn's action and whether it changed anything ("Last
        move: Left; nothing changed."), or that the reply had none. It gives a one-turn prompt (history
        length 0) the memory it needs not to repeat a move into a wall; state_key ignores it.
    render_mode: "text" (default): observations are the text render; "rgb_array": observations are the
        same board as an RGB image (`numpy` uint8 `[H, W, 3]`, `render_image`), for vision-language
        agents (VLTrajEnvManager). Only envs that draw themselves accept it (Sokoban, FrozenLake).
    """

    env_instruction: Optional[str] = None
    action_pattern: str = DEFAULT_ACTION_PATTERN
    format_penalty: float = 0.0
    ineffective_penalty: float = 0.0
    max_steps: int = 100
    special_token_list: list[str] = field(default_factory=list)
    describe_last_move: bool = False
    render_mode: str = "text"

    def __post_init__(self) -> None:
        if self.env_instruction is not None and not isinstance(self.env_instruction, str):
            raise config_error("env_instruction", f"expected a string, got {self.env_instruction!r}")
        if not isinstance(self.action_pattern, str):
            raise config_error("action_pattern", f"expected a regex string, got {self.action_pattern!r}")
        try:
            compile_action_pattern(self.action_pattern)
        except ValueError as exc:
            raise config_error("action_pattern", str(exc)) from None
        require_number(self.format_penalty, "format_penalty")
        self.format_penalty = float(self.format_penalty)
        require_number(self.ineffective_penalty, "ineffective_penalty")
        self.ineffective_penalty = float(self.ineffective_penalty)
        require_int(self.max_steps, "max_steps", minimum=1)
        self.special_token_list = [str(token) for token in (self.special_token_list or [])]
        require_bool(self.describe_last_move, "describe_last_move")
        if self.render_mode not in RENDER_MODES:
            raise config_error("render_mode", f"expected one of {list(RENDER_MODES)}, got {self.render_mode!r}")
        if self.render_mode == "rgb_array" and self.describe_last_move:
            raise config_error("describe_last_move", "it appends a line of text, and render_mode rgb_array "
                                                     "observations are images; turn one of them off")

    @classmethod
    def from_values(cls, env_config: Mapping[str, Any], env_type: str) -> "BaseEnvConfig":
        """This config from YAML-like values (``custom_envs.<Tag>.env_config``); a key that is not a
        field is an error that names it, the env type and the closest valid key."""
        valid = [f.name for f in dataclasses.fields(cls) if f.init]
        values = _plain(env_config or {})
        if not isinstance(values, dict):
            raise TypeError(f"env_config for env_type {env_type!r} must be a mapping, got {type(env_config).__name__}")
        for key in values:
            if key not in valid:
                close = difflib.get_close_matches(str(key), valid, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ValueError(
                    f"unknown env_config key {key!r} for env_type {env_type!r}.{hint} "
                    f"Valid keys ({cls.__name__}): {', '.join(sorted(valid))}"
                )
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"env_type {env_type!r}: {exc}") from None


def draws_images(env_cls: type) -> bool:
    """Whether an env class overrides `BaseEnv.render_image` (so it accepts render_mode rgb_array)."""
    return getattr(env_cls, "render_image", None) is not getattr(BaseEnv, "render_image")


def _plain(value: Any) -> Any:
    """OmegaConf containers (and tuples) -> plain dicts/lists, so configs hold ordinary values."""
    if isinstance(value, Mapping) or (hasattr(value, "items") and hasattr(value, "keys")):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(item) for item in value]
    return value


@dataclass
class StepOutcome:
    """What a legal action did; ``info`` entries are added to the step's info."""

    reward: float
    terminated: bool
    effective: bool
    info: dict[str, Any] = field(default_factory=dict)


class BaseEnv(ABC):
    """A text game. Subclasses set ``config_cls`` and implement the abstract methods.

    Public state: ``config``, ``seed`` (of the current episode), ``num_turns`` (turns taken this
    episode, valid or not), ``env_instruction``.
    """

    config_cls: ClassVar[type[BaseEnvConfig]] = BaseEnvConfig
    # env-specific metrics (from ``state_metrics``) and how they aggregate over an episode
    extra_metrics_agg_mode: ClassVar[dict[str, str]] = {}
    # the env's own reward for a valid move that changes nothing, before ineffective_penalty (the config
    # check compares the two with format_penalty: a broken reply must not be the cheaper way to stand still)
    idle_move_reward: ClassVar[float] = 0.0

    def __init__(self, config: Optional[BaseEnvConfig] = None, **config_kwargs: Any) -> None:
        """Takes its config object, or the config's fields as keywords (checked like YAML values)."""
        if config is None:
            config = self.config_cls.from_values(config_kwargs, env_type=type(self).__name__)
        elif config_kwargs:
            raise TypeError(f"{type(self).__name__}: pass either a config object or keyword fields, not both")
        if not isinstance(config, self.config_cls):
            raise TypeError(f"{type(self).__name__} needs a {self.config_cls.__name__}, got {type(config).__name__}")
        if config.render_mode == "rgb_array" and not draws_images(type(self)):
            raise config_error("render_mode", f"{type(self).__name__} renders text only; 'rgb_array' needs an env "
                                              "that draws its board (sokoban, frozen_lake)")
        self.config = config
        self.seed: Optional[int] = None
        self.num_turns = 0
        self._episode_over = True
        self._started = False
        self._last_move_line = ""  # describe_last_move's line; empty before the first turn and when it is off

    # ---- what a concrete env implements -------------------------------------------------------
    @abstractmethod
    def _reset(self, rng: random.Random) -> None:
        """Build a fresh game; all randomness of the episode must come from ``rng``."""

    @abstractmethod
    def _apply(self, action: Any) -> StepOutcome:
        """Play a legal action (as returned by ``_parse_answer``)."""

    @abstractmethod
    def render(self) -> str:
        """The observation text of the current state."""

    @abstractmethod
    def is_success(self) -> bool:
        """Whether the current state counts as solved."""

    @abstractmethod
    def default_instruction(self) -> str:
        """Rules of the game, used when ``env_config.env_instruction`` is not set."""

    def render_image(self) -> Any:
        """The current state as an RGB image (numpy uint8 `[H, W, 3]`), the same board as `render`; what
        `render_mode: rgb_array` observes. Envs that can draw themselves override it."""
        raise NotImplementedError(f"{type(self).__name__} has no image render")

    def state_key(self) -> str:
        """A string that is equal for two moments of play exactly when the game is in the same state:
        step-level credit (GiGPO's anchor states) groups turns by it. Default: the observation text,
        right for envs whose observation shows the whole state; override it where it does not."""
        return self.render()

    def state_metrics(self) -> dict[str, float]:
        """Env-specific metrics of the current state, reported on every step (valid or not) so that
        every step carries the same keys; declare each in ``extra_metrics_agg_mode``."""
        return {}

    def action_names(self) -> list[str]:
        """Fixed action vocabulary, for envs whose answers are names (Left, Up ...)."""
        return []

    def _parse_answer(self, answer: str) -> tuple[Any, Optional[str]]:
        """Map the answer text to a legal action, or (None, reason). Default: match an action name."""
        action = match_action_name(answer, self.action_names())
        if action is None:
            return None, f"{answer[:40]!r} is not one of {self.action_names()}"
        return action, None

    def random_answer(self, rng: random.Random) -> str:
        """A legal (not necessarily good) answer, drawn with ``rng``: the random scripted policy."""
        return rng.choice(self.action_names())

    def optimal_answer(self) -> Optional[str]:
        """The answer an optimal player gives now; None where the env has no solver."""
        return None

    def instruction_extras(self) -> str:
        """Text appended to the instruction whatever its source (e.g. symbol legend, actions)."""
        names = self.action_names()
        if not names:
            return ""
        try:
            example = f" Answer format: {self.format_answer(names[0])}"
        except ValueError:
            example = ""
        return f"Valid actions: {', '.join(names)}.{example}"

    # ---- the contract ---------------------------------------------------------------------------
    @property
    def env_instruction(self) -> str:
        base = self.config.env_instruction or self.default_instruction()
        extras = self.instruction_extras()
        return f"{base}\n{extras}" if extras else base

    @property
    def metrics_agg_mode(self) -> dict[str, str]:
        return {**BASE_METRICS_AGG_MODE, **self.extra_metrics_agg_mode}

    def reset(self, seed: Optional[int] = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode. The same seed gives the same game and, for the same actions, the same
        episode in any process; ``seed=None`` draws one (reported in ``info["seed"]``)."""
        if seed is None:
            seed = random.SystemRandom().randrange(2**63)
        elif isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"reset(seed=...) needs an int or None, got {seed!r}")
        seed = int(seed)  # numpy integers from a seed schedule hash like the same Python int
        self.seed = seed
        self.num_turns = 0
        # Salted, so that a policy seeded with the same int does not replay the env's own draws
        # (str seeds are hashed with SHA-512: stable across processes and Python versions).
        self._reset(random.Random(f"roll.env:{seed}"))
        self._started = True
        self._episode_over = False
        self._last_move_line = ""
        return self.observation_text(), {"env_instruction": self.env_instruction, "seed": seed}

    def step(self, action_text: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Play one turn from the model's raw text. Never raises on any text."""
        if not self._started:
            raise RuntimeError(f"{type(self).__name__}.step() called before reset()")
        if self._episode_over:
            raise RuntimeError(f"{type(self).__name__}.step() called after the episode ended; call reset()")
        self.num_turns += 1
        parsed = parse_model_text(action_text, self.config.action_pattern, self.config.special_token_list)
        action, reason = None, parsed.error
        if parsed.answer is not None:
            action, reason = self._parse_answer(parsed.answer)
        if action is None:
            outcome = StepOutcome(reward=self.config.format_penalty, terminated=False, effective=False)
        else:
            outcome = self._apply(action)
            if not outcome.effective:
                outcome = dataclasses.replace(outcome, reward=outcome.reward + self.config.ineffective_penalty)
        # the canonical action name, or for free-form answers (expressions, numbers) the answer text
        action_name = None if action is None else action if isinstance(action, str) else parsed.answer
        if self.config.describe_last_move:  # kept only where it is shown
            self._last_move_line = ("Last reply: no valid move." if action_name is None else
                                    f"Last move: {action_name}{'.' if outcome.effective else '; nothing changed.'}")
        truncated = not outcome.terminated and self.num_turns >= self.config.max_steps
        self._episode_over = outcome.terminated or truncated
        metrics = {
            "action_is_valid": float(action is not None),
            "action_is_effective": float(outcome.effective),
            "success": float(self.is_success()),
            **self.state_metrics(),
        }
        info = {
            "metrics": metrics,
            "metrics_agg_mode": self.metrics_agg_mode,
            "think_content": parsed.think,
            "action_content": parsed.answer,
            "action": action_name,
            "invalid_reason": reason if action is None else None,
            **outcome.info,
        }
        return self.observation_text(), float(outcome.reward), outcome.terminated, truncated, info

    def observation_text(self) -> Any:
        """What reset and step return: the render, and describe_last_move's line after the first turn;
        with render_mode rgb_array the board's image instead."""
        if self.config.render_mode == "rgb_array":
            return self.render_image()
        if self._last_move_line:
            return f"{self.render()}\n{self._last_move_line}"
        return self.render()

    def close(self) -> None:
        """Release resources (the bundled envs hold none)."""

    # ---- helpers for scripted policies and prompts ---------------------------------------------
    def format_answer(self, answer: str, think: str = "") -> str:
        """Model-style text that this env's ``action_pattern`` parses back to ``answer``."""
        candidates = (
            f"<answer>{answer}</answer>",
            f"<think>{think}</think><answer>{answer}</answer>",
            f"<think>{think}</think>\n<answer>{answer}</answer>",
            answer,
        )
        for text in candidates:
            parsed = parse_model_text(text, self.config.action_pattern, self.config.special_token_list)
            if parsed.answer == answer.strip():
                return text
        raise ValueError(
            f"cannot write an answer that action_pattern {self.config.action_pattern!r} accepts; "
            "scripted policies support <answer>..</answer> and <think>..</think><answer>..</answer> styles"
        )
