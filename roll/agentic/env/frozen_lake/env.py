"""FrozenLake as a text game: walk from S to G on a grid without stepping into a hole.

Our own implementation (gymnasium is used only in a test that checks the dynamics agree).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.grid_image import FROZEN_LAKE_TILES, draw_grid
from roll.agentic.env.frozen_lake.config import (
    FROZEN,
    GOAL,
    HOLE,
    PLAYER,
    PLAYER_IN_HOLE,
    PLAYER_ON_GOAL,
    FrozenLakeEnvConfig,
)

# gymnasium's action numbering: 0 left, 1 down, 2 right, 3 up, as (d_row, d_col)
MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))
_MAX_MAP_DRAWS = 10_000
TILE_WORDS = {"S": "frozen", "F": "frozen", "H": "hole", "G": "goal"}  # describe_surroundings


def has_path(desc: list[str]) -> bool:
    """Whether some G is reachable from S through non-hole cells."""
    return shortest_path_moves(desc, _find(desc, "S")) is not None


def open_neighbours(desc: list[str], cell: tuple[int, int]):
    """(move index, cell) for each move from ``cell`` that stays on the map and does not enter a hole."""
    for move, (dr, dc) in enumerate(MOVES):
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < len(desc) and 0 <= c < len(desc[0]) and desc[r][c] != "H":
            yield move, (r, c)


def shortest_path_moves(desc: list[str], start: tuple[int, int]) -> Optional[list[int]]:
    """BFS over the map: the move indices of a shortest hole-free path from ``start`` to a goal."""
    parent: dict[tuple[int, int], Optional[tuple[tuple[int, int], int]]] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if desc[cell[0]][cell[1]] == "G":
            moves: list[int] = []
            while parent[cell] is not None:
                cell, move = parent[cell]
                moves.append(move)
            return moves[::-1]
        for move, nxt in open_neighbours(desc, cell):
            if nxt not in parent:
                parent[nxt] = (cell, move)
                queue.append(nxt)
    return None


def goal_distances(desc: list[str], measure: str) -> dict[tuple[int, int], int]:
    """Distance from every non-hole cell to the nearest goal: "manhattan" ignores holes, "path" counts
    the moves of a shortest hole-free path (BFS from the goals). Cells cut off from every goal are left
    out (generated maps connect S to a goal; a ``desc`` need not)."""
    rows, cols = len(desc), len(desc[0])
    goals = [(r, c) for r in range(rows) for c in range(cols) if desc[r][c] == "G"]
    if measure == "manhattan":
        return {(r, c): min(abs(r - gr) + abs(c - gc) for gr, gc in goals)
                for r in range(rows) for c in range(cols) if desc[r][c] != "H"}
    distance = {goal: 0 for goal in goals}
    queue = deque(goals)
    while queue:
        cell = queue.popleft()
        for _, nxt in open_neighbours(desc, cell):
            if nxt not in distance:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return distance


def start_cells(desc: list[str], beside_hole: bool = False) -> list[tuple[int, int]]:
    """random_start's choices: the non-goal cells with a hole-free path to a goal, in row order; with
    ``beside_hole`` only those where a move toward the goal falls into a hole (start_beside_hole)."""
    cells = sorted(cell for cell, distance in goal_distances(desc, "path").items() if distance > 0)
    return [cell for cell in cells if has_goalward_hole(desc, cell)] if beside_hole else cells


def has_goalward_hole(desc: list[str], cell: tuple[int, int]) -> bool:
    """Whether a move from ``cell`` that shortens the Manhattan distance to the nearest goal lands in a hole."""
    rows, cols = len(desc), len(desc[0])
    goals = [(r, c) for r in range(rows) for c in range(cols) if desc[r][c] == "G"]

    def distance(r: int, c: int) -> int:
        return min(abs(r - gr) + abs(c - gc) for gr, gc in goals)

    for dr, dc in MOVES:
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < rows and 0 <= c < cols and desc[r][c] == "H" and distance(r, c) < distance(*cell):
            return True
    return False


def generate_map(size: int, p: float, rng: random.Random) -> list[str]:
    """A size x size map, S top-left and G bottom-right, each other tile frozen with probability p,
    redrawn until G is reachable (so every map is solvable)."""
    for _ in range(_MAX_MAP_DRAWS):
        grid = [["F" if rng.random() < p else "H" for _ in range(size)] for _ in range(size)]
        grid[0][0], grid[-1][-1] = "S", "G"
        desc = ["".join(row) for row in grid]
        if has_path(desc):
            return desc
    raise ValueError(f"no solvable {size}x{size} FrozenLake map in {_MAX_MAP_DRAWS} draws with p={p}; raise p")


def _find(desc: list[str], letter: str) -> tuple[int, int]:
    for r, row in enumerate(desc):
        c = row.find(letter)
        if c >= 0:
            return r, c
    raise ValueError(f"map has no {letter!r}")


class FrozenLakeEnv(BaseEnv):
    """Rewards: 1 on reaching the goal, 0 otherwise (plus progress_reward and hole_penalty when set). The
    episode ends in a hole or on the goal."""

    config_cls = FrozenLakeEnvConfig
    config: FrozenLakeEnvConfig

    def __init__(self, config: Optional[FrozenLakeEnvConfig] = None, **config_kwargs) -> None:
        super().__init__(config, **config_kwargs)
        self.desc: list[str] = []
        self.player: tuple[int, int] = (0, 0)
        self._goal_distance: dict[tuple[int, int], int] = {}  # progress_reward's measure, per map
        self._rng = random.Random(0)
        # sorted keys give ROLL's order (1 Left, 2 Down, 3 Right, 4 Up) -> gymnasium's 0..3
        self._names = [self.config.action_lookup[k] for k in sorted(self.config.action_lookup)]

    def _reset(self, rng: random.Random) -> None:
        cfg = self.config
        self.desc = self._draw_map(rng)
        if cfg.random_start:
            starts = start_cells(self.desc, beside_hole=cfg.start_beside_hole)
            redraws = _MAX_MAP_DRAWS if cfg.desc is None and cfg.map_seed is None else 0
            while not starts and redraws:  # a generated map without a decision cell is redrawn
                self.desc = self._draw_map(rng)
                starts = start_cells(self.desc, beside_hole=cfg.start_beside_hole)
                redraws -= 1
            if not starts:
                wanted = " where a move toward the goal falls into a hole (start_beside_hole)" if cfg.start_beside_hole else ""
                raise ValueError(f"env_config.random_start: the map {self.desc} has no cell with a hole-free path "
                                 f"to the goal{wanted}; give a map with one")
            self.player = rng.choice(starts)
        else:
            self.player = _find(self.desc, "S")
        self._goal_distance = goal_distances(self.desc, self.config.progress_measure)
        self._rng = rng  # the slips of this episode continue the seed's stream

    def _draw_map(self, rng: random.Random) -> list[str]:
        cfg = self.config
        if cfg.desc is not None:
            return list(cfg.desc)
        if cfg.map_seed is not None:
            return generate_map(cfg.size, cfg.p, random.Random(cfg.map_seed))
        return generate_map(cfg.size, cfg.p, rng)

    def action_names(self) -> list[str]:
        return list(self._names)

    def _apply(self, action: str) -> StepOutcome:
        move = self._names.index(action)
        if self.config.is_slippery:
            move = (move + self._rng.choice((-1, 0, 1))) % 4
        dr, dc = MOVES[move]
        rows, cols = len(self.desc), len(self.desc[0])
        before = self.player
        self.player = (min(max(before[0] + dr, 0), rows - 1), min(max(before[1] + dc, 0), cols - 1))
        tile = self.desc[self.player[0]][self.player[1]]
        distance = self._goal_distance
        # no progress into a hole, nor on a map of your own (desc) whose start is cut off from the goal
        reachable = tile != "H" and before in distance and self.player in distance
        progress = distance[before] - distance[self.player] if reachable else 0
        return StepOutcome(
            reward={"G": 1.0, "H": self.config.hole_penalty}.get(tile, 0.0) + self.config.progress_reward * progress,
            terminated=tile in "GH",
            effective=self.player != before,
        )

    def is_success(self) -> bool:
        return bool(self.desc) and self.desc[self.player[0]][self.player[1]] == "G"

    def state_key(self) -> str:
        # the map and the player's cell are the whole state (slipping is the env's randomness, not state)
        return f"{'/'.join(self.desc)}@{self.player[0]},{self.player[1]}"

    def cell_codes(self) -> list[list[int]]:
        """The map as grid_lookup codes (0 player ... 5 player on goal)."""
        code = {"S": FROZEN, "F": FROZEN, "H": HOLE, "G": GOAL}
        on = {"H": PLAYER_IN_HOLE, "G": PLAYER_ON_GOAL}
        return [[on.get(letter, PLAYER) if (r, c) == self.player else code[letter] for c, letter in enumerate(row)]
                for r, row in enumerate(self.desc)]

    def render(self) -> str:
        lookup = self.config.grid_lookup
        lines = [self.config.cell_separator.join(lookup[code] for code in row) for row in self.cell_codes()]
        if self.config.describe_surroundings:
            lines.append(self._surroundings())
        return "\n".join(lines)

    def render_image(self):
        return draw_grid(self.cell_codes(), FROZEN_LAKE_TILES)

    def _surroundings(self) -> str:
        """What one move in each direction reaches, in action order: "Left: edge, Down: hole, ..."."""
        rows, cols = len(self.desc), len(self.desc[0])
        parts = []
        for name, (dr, dc) in zip(self._names, MOVES):
            r, c = self.player[0] + dr, self.player[1] + dc
            parts.append(f"{name}: {TILE_WORDS[self.desc[r][c]] if 0 <= r < rows and 0 <= c < cols else 'edge'}")
        return ", ".join(parts) + "."

    def default_instruction(self) -> str:
        text = (
            "You are solving the FrozenLake puzzle. Move the player to the goal without falling into a hole. "
            "Moving into the edge of the map leaves you where you are."
        )
        if self.config.is_slippery:
            text += " The ice is slippery: you may slide to a side instead of the direction you chose."
        return text

    def instruction_extras(self) -> str:
        legend = ", ".join(f"{symbol}: {meaning}" for symbol, meaning in self.config.grid_vocab.items())
        actions = super().instruction_extras()
        return f"Symbols: {legend}.\n{actions}" if legend else actions

    def optimal_answer(self) -> Optional[str]:
        """First move of a shortest hole-free path (optimal without slipping; a heuristic with it)."""
        moves = shortest_path_moves(self.desc, self.player) if self.desc else None
        return self._names[moves[0]] if moves else None
