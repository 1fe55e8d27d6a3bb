"""FrozenLake settings: ``custom_envs.<Tag>.env_config`` keys for ``env_type: frozen_lake``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from roll.agentic.env.base import (
    BaseEnvConfig,
    check_vocab,
    config_error,
    int_keyed_lookup,
    require_bool,
    require_cell_separator,
    require_int,
    require_number,
    require_progress_measure,
)

# Cell codes used by grid_lookup (ROLL's numbering).
PLAYER, FROZEN, HOLE, GOAL, PLAYER_IN_HOLE, PLAYER_ON_GOAL = range(6)
MAP_CHARS = "SFHG"  # gymnasium's map letters: Start, Frozen, Hole, Goal


@dataclass
class FrozenLakeEnvConfig(BaseEnvConfig):
    """size: side of a generated square map. p: probability that a generated tile is frozen (not a
    hole); maps are redrawn until the goal is reachable. is_slippery: the move goes the chosen way
    with probability 1/3 and to each perpendicular side with 1/3 (gymnasium's rule).
    map_seed: when set, every episode uses the map of this seed (the episode seed still drives the
    slipping). desc: a fixed map as rows of S/F/H/G, overriding size/p/map_seed.
    grid_lookup: cell code -> symbol (0 player, 1 frozen, 2 hole, 3 goal, 4 player in hole,
    5 player on goal). grid_vocab: symbol -> meaning, told to the model.
    action_lookup: the four action names, in the order left, down, right, up (by key).

    Observation and reward design (all off by default, ROLL's behaviour):
    cell_separator: text between the cells of a row. SmolLM2's tokenizer reads "P___" as two tokens
        ("P", "___"), so a row's cells have no fixed token positions; " " gives one token per cell.
    describe_surroundings: append a line naming what lies one move away in each direction
        ("Left: edge, Down: hole, Right: frozen, Up: edge."): the same information as the map, where
        a small model can read it without counting columns.
    progress_reward: added to a move's reward per cell it brings the player closer to the nearest goal
        (negative when it moves away). A move into a hole earns none, so shaping never pays for falling
        in. Scores change; `success` does not.
    progress_measure: the distance progress_reward counts: "manhattan" (rows + columns, holes ignored)
        or "path" (moves of the shortest hole-free path). With "path" a move into a dead end costs
        and the move back out of it pays, where Manhattan distance charges the way out.
    random_start: start each episode on a cell drawn at random (with the episode's seed) among the
        frozen cells that have a hole-free path to the goal, instead of on S; the map is unchanged.
        Monte Carlo's "exploring starts": training meets the cells a fixed start rarely reaches (dead
        ends whose only way out is Left or Up) while the policy is still broad enough to try the way out.
        For training envs; keep validation on S to compare with the map-blind baselines.
    start_beside_hole: with random_start, draw only among the cells where a move toward the goal falls
        into a hole: the boards where reading the map decides the move (a curriculum of decision
        points). Generated maps without such a cell are redrawn; a fixed map (desc, map_seed) must have one.
    hole_penalty: added to the reward of the move that falls into a hole (negative to punish it).
        Without it a fall only loses the rewards that would have followed, a weak signal for the one
        turn whose reply caused it; step-wise credit (GiGPO) compares that turn with its alternatives."""

    size: int = 4
    p: float = 0.8
    is_slippery: bool = True
    map_seed: Optional[int] = None
    desc: Optional[list[str]] = None
    grid_lookup: dict[int, str] = field(
        default_factory=lambda: {0: "P", 1: "_", 2: "O", 3: "G", 4: "X", 5: "√"}
    )
    grid_vocab: dict[str, str] = field(
        default_factory=lambda: {
            "P": "player",
            "_": "frozen",
            "O": "hole",
            "G": "goal",
            "X": "player in hole",
            "√": "player on goal",
        }
    )
    action_lookup: dict[int, str] = field(default_factory=lambda: {1: "Left", 2: "Down", 3: "Right", 4: "Up"})
    cell_separator: str = ""
    describe_surroundings: bool = False
    progress_reward: float = 0.0
    progress_measure: str = "manhattan"
    random_start: bool = False
    start_beside_hole: bool = False
    hole_penalty: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int(self.size, "size", minimum=2)
        require_number(self.p, "p")
        if not 0.0 < self.p <= 1.0:
            raise config_error("p", f"must be in (0, 1], got {self.p}")
        require_bool(self.is_slippery, "is_slippery")
        if self.map_seed is not None:
            require_int(self.map_seed, "map_seed")
        if self.desc is not None:
            self.desc = _check_desc(self.desc)
        self.grid_lookup = int_keyed_lookup(self.grid_lookup, "grid_lookup", list(range(6)))
        self.grid_vocab = check_vocab(self.grid_vocab, list(self.grid_lookup.values()), "grid_vocab")
        if not isinstance(self.action_lookup, dict) or len(self.action_lookup) != 4:
            raise config_error("action_lookup", f"needs 4 entries (left, down, right, up), got {self.action_lookup!r}")
        names = int_keyed_lookup(self.action_lookup, "action_lookup")
        if len({name.casefold() for name in names.values()}) != 4:
            raise config_error("action_lookup", f"names must differ ignoring case, got {list(names.values())}")
        self.action_lookup = names
        require_cell_separator(self.cell_separator)
        require_bool(self.describe_surroundings, "describe_surroundings")
        require_bool(self.random_start, "random_start")
        require_bool(self.start_beside_hole, "start_beside_hole")
        if self.start_beside_hole and not self.random_start:
            raise config_error("start_beside_hole", "chooses among random starts; set random_start: true with it")
        require_number(self.progress_reward, "progress_reward")
        self.progress_reward = float(self.progress_reward)
        require_progress_measure(self.progress_measure)
        require_number(self.hole_penalty, "hole_penalty")
        self.hole_penalty = float(self.hole_penalty)


def _check_desc(desc: object) -> list[str]:
    if not isinstance(desc, list) or not desc or not all(isinstance(row, str) for row in desc):
        raise config_error("desc", f"expected a list of strings of S/F/H/G, got {desc!r}")
    if len({len(row) for row in desc}) != 1 or not desc[0]:
        raise config_error("desc", "rows must be non-empty and of equal length")
    text = "".join(desc)
    if set(text) - set(MAP_CHARS):
        raise config_error("desc", f"unknown letters {sorted(set(text) - set(MAP_CHARS))}; use S, F, H, G")
    if text.count("S") != 1 or "G" not in text:
        raise config_error("desc", "needs exactly one S and at least one G")
    return list(desc)
