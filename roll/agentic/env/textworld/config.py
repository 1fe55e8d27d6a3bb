"""``env_type: textworld`` settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from roll.agentic.env.base import BaseEnvConfig, config_error, require_int

REWARDS = ("intermediate", "score")


@dataclass
class TextWorldEnvConfig(BaseEnvConfig):
    """nb_rooms / nb_objects / quest_length: the generated game's size (TextWorld's GameOptions).
    num_games: 0 = every seed its own game; N = seeds map onto N games (seed % N), so the games
        generated once (seconds each) are reused from the cache.
    show_admissible_commands: list the commands the game accepts now under each observation.
    restrict_to_admissible: a command not in that list is a format error (no game turn is spent).
    reward: "intermediate" = TextWorld's per-step progress signal (1 closer to the goal, -1 the quest
        became unwinnable, else 0); "score" = the change of the game's score.
    cache_dir: where compiled games are kept (default: $ROLL_CACHE_DIR/textworld or ~/.cache/roll/textworld).
    max_command_chars: longer answers are format errors."""

    max_steps: int = 30
    nb_rooms: int = 3
    nb_objects: int = 5
    quest_length: int = 3
    num_games: int = 0
    show_admissible_commands: bool = True
    restrict_to_admissible: bool = False
    reward: str = "intermediate"
    cache_dir: Optional[str] = None
    max_command_chars: int = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, minimum in (("nb_rooms", 1), ("nb_objects", 0), ("quest_length", 1), ("num_games", 0), ("max_command_chars", 1)):
            require_int(getattr(self, name), name, minimum=minimum)
        if self.reward not in REWARDS:
            raise config_error("reward", f"must be one of {list(REWARDS)}, got {self.reward!r}")
        for name in ("show_admissible_commands", "restrict_to_admissible"):
            if not isinstance(getattr(self, name), bool):
                raise config_error(name, f"expected true or false, got {getattr(self, name)!r}")
        if self.cache_dir is not None and not isinstance(self.cache_dir, str):
            raise config_error("cache_dir", f"expected a path string, got {self.cache_dir!r}")
