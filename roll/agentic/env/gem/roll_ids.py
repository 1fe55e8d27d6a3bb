"""ROLL's GEM env types, as ROLL's configs write them: ``env_type: game:GuessTheNumber-v0`` with the
GEM env's keyword arguments straight in ``env_config`` (traj_envs_gem_games.yaml, traj_envs_gem_rg.yaml).

Each id gets its own registered env type whose config has exactly those keyword arguments as fields
(so a misspelt key is still an error naming the closest one) and passes them to GEM as
``gem_kwargs``. Everything else about the env is ``env_type: gem`` (env.py).
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any, Optional

from roll.agentic.env.base import config_error
from roll.agentic.env.gem.config import GemEnvConfig
from roll.agentic.env.gem.env import GemEnv

_RG_ARGS = ("size", "seed")
# id -> the GEM keyword arguments ROLL's configs set for it
ROLL_GEM_ENV_TYPES: dict[str, tuple[str, ...]] = {
    "game:GuessTheNumber-v0": ("min_number", "max_number", "max_turns"),
    "game:Mastermind-v0": ("code_length", "num_numbers", "max_turns", "duplicate_numbers"),
    "game:Minesweeper-v0": ("rows", "cols", "num_mines", "max_turns"),
    "game:Wordle-v0": ("word_length", "only_real_words", "max_turns"),
    "game:FifteenPuzzle-v0": ("num_rows", "max_turns"),
    "game:Hangman-v0": ("word_length", "hardcore", "max_turns"),
    "game:Sudoku-v0": ("clues", "max_turns", "scale"),
    "game:TowerofHanoi-v0": ("num_disks", "max_turns"),
    "rg:advanced_geometry": _RG_ARGS,
    "rg:sokoban": _RG_ARGS,
    "rg:leg_counting": _RG_ARGS,
}


def _config_class(gem_id: str, arg_names: tuple[str, ...]) -> type[GemEnvConfig]:
    def __post_init__(self: Any) -> None:
        if self.gem_id != gem_id:
            raise config_error("gem_id", f"env_type {gem_id!r} fixes gem_id; use env_type 'gem' to choose another")
        self.gem_kwargs = {**self.gem_kwargs, **{name: getattr(self, name) for name in arg_names if getattr(self, name) is not None}}
        GemEnvConfig.__post_init__(self)

    fields = [("gem_id", str, field(default=gem_id))] + [(name, Optional[Any], field(default=None)) for name in arg_names]
    name = "Gem" + "".join(part for part in gem_id.replace(":", "_").replace("-", "_").title().split("_")) + "Config"
    return make_dataclass(name, fields, bases=(GemEnvConfig,), namespace={
        "__post_init__": __post_init__,
        "__doc__": f"env_type {gem_id!r}: GEM keyword arguments {', '.join(arg_names)} (None: GEM's default).",
    })


def roll_gem_env_classes() -> dict[str, type[GemEnv]]:
    """env_type -> a GemEnv subclass whose config takes that id's GEM keyword arguments."""
    classes = {}
    for gem_id, arg_names in ROLL_GEM_ENV_TYPES.items():
        config_cls = _config_class(gem_id, arg_names)
        classes[gem_id] = type(config_cls.__name__.removesuffix("Config") + "Env", (GemEnv,), {"config_cls": config_cls})
    return classes
