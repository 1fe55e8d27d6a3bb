"""Sokoban settings: ``custom_envs.<Tag>.env_config`` keys for ``env_type: sokoban``."""

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

# Cell codes used by grid_lookup (ROLL's and gym-sokoban's numbering).
WALL, EMPTY, TARGET, BOX_ON_TARGET, BOX, PLAYER, PLAYER_ON_TARGET = range(7)


@dataclass
class SokobanEnvConfig(BaseEnvConfig):
    """dim_room: (rows, cols) of the room, outer walls included; dim_x/dim_y, when both given,
    override it as (dim_x, dim_y) like ROLL. num_boxes: boxes (and targets). search_depth: how many
    reverse moves the generator plays from the solved position; the room is solvable in at most
    min(search_depth, max_steps) moves. grid_lookup: cell code -> symbol (0 wall, 1 empty, 2 target,
    3 box on target, 4 box, 5 player, 6 player on target). grid_vocab: symbol -> meaning, told to the
    model. action_lookup: the four action names in the order up, down, left, right (by key).
    cell_separator (roll's key, default "" as in ROLL): text between the cells of a row; " " gives
    SmolLM2's tokenizer one token per cell instead of merged runs such as "___".
    describe_surroundings (roll's key, default false as ROLL has no such line): append what one move
    in each direction does ("Up: wall, Down: box (can push), Left: floor, Right: target.") and where
    each box off its target is, from the player, and its nearest empty target, from the box: the
    board's content in a form a small model reads without aligning columns across rows.
    progress_reward (roll's key, default 0 as ROLL has none): added to a move's reward per cell it
    brings the work left closer, the work left being each box's distance to its nearest target plus the
    player's distance to the nearest box off its target (to standing next to it): stepping towards the
    box earns it, pushing the box towards its target earns it, and stepping or pushing away costs it.
    It is a difference of one potential, so a round trip nets nothing and the solutions do not change.
    progress_measure (roll's key): the work left that progress_reward counts: "manhattan" (default, the
    sum above: walls ignored, so walking round a wall costs) or "path" (the moves of a shortest solution,
    by the solver: every move of some shortest solution earns it, every other move costs or earns
    nothing). A move that makes the room unsolvable earns no progress, nor does any move after it.
    random_start (roll's key, default false as in ROLL): after the room is generated, move the player
    to a cell drawn with the episode's seed among those it can walk to without pushing a box, and from
    which the room is still solvable within max_steps. Reverse play leaves the player beside the box it
    last pulled, ready to push; here training also meets rooms where the player must first walk round
    walls to the side a push needs, as most validation rooms ask. For training envs: validation rooms
    stay as generated.
    describe_push (roll's key, default false as ROLL has no such line): after each box's line, which
    way to push it and where to stand for that push, from the player ("Push it Up: stand 2 down and 1
    left from you.", or "Push it Up: you stand there."). The push brings the box a cell closer to its
    target: along the target's column first, then its row, taking the first with no wall ahead or behind
    and no box ahead. This is Sokoban's pushing rule applied to the box line, not a solution: the walk
    to that cell and the order of pushes are left to the policy. A policy that walks to that cell and
    pushes is benchmarks/map_blind_baselines.py's line reader.
    lost_room_penalty (roll's key, default 0 as ROLL has none): added to the reward of the move after
    which no push sequence solves the room any more (a box pushed into a corner, say): the move that
    loses the episode, priced like FrozenLake's hole_penalty. Without it such a move costs only its
    -0.1, less than a detour costs under progress_reward."""

    max_steps: int = 100
    dim_room: tuple[int, int] = (6, 6)
    dim_x: Optional[int] = None
    dim_y: Optional[int] = None
    num_boxes: int = 1
    search_depth: int = 300
    grid_lookup: dict[int, str] = field(
        default_factory=lambda: {0: "#", 1: "_", 2: "O", 3: "√", 4: "X", 5: "P", 6: "S"}
    )
    grid_vocab: dict[str, str] = field(
        default_factory=lambda: {
            "#": "wall",
            "_": "empty",
            "O": "target",
            "√": "box on target",
            "X": "box",
            "P": "player",
            "S": "player on target",
        }
    )
    action_lookup: dict[int, str] = field(default_factory=lambda: {1: "Up", 2: "Down", 3: "Left", 4: "Right"})
    cell_separator: str = ""
    describe_surroundings: bool = False
    progress_reward: float = 0.0
    progress_measure: str = "manhattan"
    describe_push: bool = False
    random_start: bool = False
    lost_room_penalty: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.dim_x is None) != (self.dim_y is None):
            raise config_error("dim_x", "give both dim_x and dim_y, or neither (then dim_room is used)")
        if self.dim_x is not None:
            self.dim_room = (self.dim_x, self.dim_y)
        if not isinstance(self.dim_room, (list, tuple)) or len(self.dim_room) != 2:
            raise config_error("dim_room", f"expected [rows, cols], got {self.dim_room!r}")
        for value in self.dim_room:
            require_int(value, "dim_room", minimum=4)
        self.dim_room = (int(self.dim_room[0]), int(self.dim_room[1]))
        require_int(self.num_boxes, "num_boxes", minimum=1)
        interior = (self.dim_room[0] - 2) * (self.dim_room[1] - 2)
        if self.num_boxes + 2 > interior:
            raise config_error("num_boxes", f"{self.num_boxes} boxes do not fit a {self.dim_room} room")
        require_int(self.search_depth, "search_depth", minimum=1)
        self.grid_lookup = int_keyed_lookup(self.grid_lookup, "grid_lookup", list(range(7)))
        self.grid_vocab = check_vocab(self.grid_vocab, list(self.grid_lookup.values()), "grid_vocab")
        if not isinstance(self.action_lookup, dict) or len(self.action_lookup) != 4:
            raise config_error("action_lookup", f"needs 4 entries (up, down, left, right), got {self.action_lookup!r}")
        names = int_keyed_lookup(self.action_lookup, "action_lookup")
        if len({name.casefold() for name in names.values()}) != 4:
            raise config_error("action_lookup", f"names must differ ignoring case, got {list(names.values())}")
        self.action_lookup = names
        require_cell_separator(self.cell_separator)
        require_bool(self.describe_surroundings, "describe_surroundings")
        require_bool(self.describe_push, "describe_push")
        if self.describe_push and not self.describe_surroundings:
            raise config_error("describe_push", "it adds to the box lines of describe_surroundings: set "
                                                "describe_surroundings: true too")
        require_number(self.progress_reward, "progress_reward")
        self.progress_reward = float(self.progress_reward)
        require_progress_measure(self.progress_measure)
        require_bool(self.random_start, "random_start")
        require_number(self.lost_room_penalty, "lost_room_penalty")
        self.lost_room_penalty = float(self.lost_room_penalty)
