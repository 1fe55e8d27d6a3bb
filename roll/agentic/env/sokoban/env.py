"""Sokoban as a text game: push every box onto a target."""

from __future__ import annotations

import random
from typing import Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.grid_image import SOKOBAN_TILES, draw_grid
from roll.agentic.env.sokoban.config import (
    BOX,
    BOX_ON_TARGET,
    PLAYER,
    PLAYER_ON_TARGET,
    TARGET,
    WALL,
    SokobanEnvConfig,
)
from roll.agentic.env.sokoban.room import deltas, generate_room, push, solve, walkable_from

STEP_REWARD = -0.1
BOX_ON_REWARD = 1.0
BOX_OFF_REWARD = -1.0
SOLVED_REWARD = 10.0


class SokobanEnv(BaseEnv):
    """Rewards per legal move: -0.1, +1 for a box pushed onto a target, -1 for one pushed off, +10
    when all boxes are on targets (which ends the episode), plus progress_reward per cell of work left
    saved and lost_room_penalty for the push that makes the room unsolvable (see SokobanEnvConfig). A
    move into a wall or an immovable box is legal but ineffective (the -0.1 still applies, as in
    gym-sokoban)."""

    config_cls = SokobanEnvConfig
    config: SokobanEnvConfig
    extra_metrics_agg_mode = {"boxes_on_target": "last"}
    idle_move_reward = STEP_REWARD

    def __init__(self, config: Optional[SokobanEnvConfig] = None, **config_kwargs) -> None:
        super().__init__(config, **config_kwargs)
        self.rows, self.cols = self.config.dim_room
        self.fixed: tuple[int, ...] = ()
        self.targets: frozenset[int] = frozenset()
        self.boxes: frozenset[int] = frozenset()
        self.player = 0
        self.optimal_moves = 0  # length of a shortest solution of the current room
        self._names = [self.config.action_lookup[k] for k in sorted(self.config.action_lookup)]
        self._plan: dict[tuple[int, frozenset[int]], int] = {}
        self._moves_left: dict[tuple[int, frozenset[int]], Optional[int]] = {}  # moves_left's cache, per room

    def _reset(self, rng: random.Random) -> None:
        depth = min(self.config.search_depth, self.config.max_steps)
        room = generate_room(self.rows, self.cols, self.config.num_boxes, depth, rng)
        self.fixed, self.targets = room.fixed, room.targets
        self.boxes, self.player = room.boxes, room.player
        self.optimal_moves = room.optimal_moves
        if self.config.random_start:
            self._move_player_to_random_start(rng)
        self._plan = {}
        self._moves_left = {}

    def _move_player_to_random_start(self, rng: random.Random) -> None:
        """random_start: a walkable cell from which a solution still fits the episode's moves (the
        generated cell always qualifies, so the draw never comes up empty)."""
        choices = []
        for cell in walkable_from(self.fixed, self.cols, self.player, self.boxes):
            moves = solve(self.fixed, self.cols, cell, self.boxes, max_moves=self.config.max_steps)
            if moves:
                choices.append((cell, len(moves)))
        self.player, self.optimal_moves = rng.choice(choices)

    def action_names(self) -> list[str]:
        return list(self._names)

    def _apply(self, action: str) -> StepOutcome:
        moved = push(self.fixed, self.cols, self.player, self.boxes, self._names.index(action))
        reward = STEP_REWARD
        if moved is not None:
            before, work_before = len(self.boxes & self.targets), self._progress_distance()
            before_state = (self.player, self.boxes)
            self.player, self.boxes, _ = moved
            after = len(self.boxes & self.targets)
            reward += BOX_ON_REWARD * max(after - before, 0) + BOX_OFF_REWARD * max(before - after, 0)
            work_after = self._progress_distance()
            if work_before is not None and work_after is not None:  # else the room is lost: no progress
                reward += self.config.progress_reward * (work_before - work_after)
            if self.config.lost_room_penalty and moved[2] is not None and self._lost_by_this_push(before_state):
                reward += self.config.lost_room_penalty
        solved = self.is_success()
        if solved:
            reward += SOLVED_REWARD
        return StepOutcome(
            reward=reward,
            terminated=solved,
            effective=moved is not None,
        )

    def state_metrics(self) -> dict[str, float]:
        return {"boxes_on_target": float(len(self.boxes & self.targets))}

    def is_success(self) -> bool:
        return bool(self.targets) and self.boxes == self.targets

    def cell_codes(self) -> list[list[int]]:
        """The grid as grid_lookup codes (0 wall ... 6 player on target)."""
        grid = []
        for r in range(self.rows):
            row = []
            for i in range(r * self.cols, (r + 1) * self.cols):
                on_target = self.fixed[i] == TARGET
                if i == self.player:
                    row.append(PLAYER_ON_TARGET if on_target else PLAYER)
                elif i in self.boxes:
                    row.append(BOX_ON_TARGET if on_target else BOX)
                else:
                    row.append(self.fixed[i])  # fixed cells use the same codes: wall, empty, target
            grid.append(row)
        return grid

    def state_key(self) -> str:
        # walls and targets fixed by the seed, plus where the player and the boxes are now
        return f"{self.fixed}|{sorted(self.targets)}|{self.player}|{sorted(self.boxes)}"

    def render(self) -> str:
        if not self.fixed:
            return ""
        lookup = self.config.grid_lookup
        sep = self.config.cell_separator
        grid = "\n".join(sep.join(lookup[code] for code in row) for row in self.cell_codes())
        if not self.config.describe_surroundings:
            return grid
        return "\n".join([grid, self._surroundings(), *self._box_lines()])

    def render_image(self):
        return draw_grid(self.cell_codes(), SOKOBAN_TILES)

    def _surroundings(self) -> str:
        """What one move in each direction does, in action order."""
        parts = []
        for direction, (name, step) in enumerate(zip(self._names, deltas(self.cols))):
            cell = self.player + step
            if cell in self.boxes:
                movable = push(self.fixed, self.cols, self.player, self.boxes, direction) is not None
                what = "box (can push)" if movable else "box (blocked)"
            else:
                what = {WALL: "wall", TARGET: "target"}.get(self.fixed[cell], "floor")
            parts.append(f"{name}: {what}")
        return ", ".join(parts) + "."

    def _box_lines(self) -> list[str]:
        """Each box off its target: where it is from the player, and its nearest empty target from it."""
        free_targets = sorted(self.targets - self.boxes)
        lines = []
        for box in sorted(self.boxes - self.targets):
            target = min(free_targets, key=lambda t: self._distance(box, t))
            lines.append(f"Box: {self._offset(self.player, box)} from you; "
                         f"its target: {self._offset(box, target)} from the box.")
            if self.config.describe_push:
                lines.append(self._push_line(box, target))
        return lines

    def _push_line(self, box: int, target: int) -> str:
        """describe_push: a push towards `target` and the cell behind the box it is made from, relative
        to the player. Of the (at most two) pushes that bring the box closer, the first (along the
        column, then the row) whose cell ahead and cell behind are not walls and the cell ahead holds no
        other box; if neither qualifies, the first."""
        rows = target // self.cols - box // self.cols
        cols = target % self.cols - box % self.cols
        up, down, left, right = range(4)  # directions in action order, as deltas() and push() number them
        pushes = [down if rows > 0 else up] if rows else []
        pushes += [right if cols > 0 else left] if cols else []
        steps = deltas(self.cols)

        def is_open(direction: int) -> bool:  # the cell behind is floor and the move rule lets the box go
            stand = box - steps[direction]
            return self.fixed[stand] != WALL and push(self.fixed, self.cols, stand, self.boxes, direction) is not None

        direction = next((d for d in pushes if is_open(d)), pushes[0])
        stand = box - steps[direction]
        where = "you stand there" if stand == self.player else f"stand {self._offset(self.player, stand)} from you"
        return f"Push it {self._names[direction]}: {where}."

    def work_left(self) -> int:
        """progress_reward's measure: the boxes' distances to their nearest targets, plus the player's
        distance to standing next to the nearest box off its target (0 when every box is on one).
        Manhattan distances, walls ignored: a shaping signal, not the solver's move count."""
        loose = self.boxes - self.targets
        if not loose:
            return 0
        boxes = sum(min(self._distance(box, t) for t in self.targets) for box in loose)
        return boxes + min(self._distance(self.player, box) for box in loose) - 1

    def moves_left(self) -> Optional[int]:
        """progress_measure "path": the moves of a shortest solution from here (BFS), None when no push
        sequence solves the room any more (a box in a corner, say; in Sokoban that is for good)."""
        return self._moves_left_from((self.player, self.boxes))

    def _moves_left_from(self, state: tuple[int, frozenset[int]]) -> Optional[int]:
        """moves_left for any (player, boxes) of this room, cached per room."""
        if state not in self._moves_left:
            moves = solve(self.fixed, self.cols, *state)
            self._moves_left[state] = None if moves is None else len(moves)
        return self._moves_left[state]

    def _lost_by_this_push(self, before_state: tuple[int, frozenset[int]]) -> bool:
        """Whether the room was solvable before this move and is not now (only a push can lose it)."""
        return self._moves_left_from(before_state) is not None and self.moves_left() is None

    def _progress_distance(self) -> Optional[int]:
        """The distance progress_reward pays the drop of (none computed while it is off)."""
        if not self.config.progress_reward:
            return 0
        return self.moves_left() if self.config.progress_measure == "path" else self.work_left()

    def _distance(self, a: int, b: int) -> int:
        return abs(a // self.cols - b // self.cols) + abs(a % self.cols - b % self.cols)

    def _offset(self, origin: int, cell: int) -> str:
        """'2 up and 1 left' in the action names, one count per axis that differs."""
        up, down, left, right = (name.lower() for name in self._names)
        rows, cols = cell // self.cols - origin // self.cols, cell % self.cols - origin % self.cols
        parts = [f"{abs(rows)} {down if rows > 0 else up}"] if rows else []
        parts += [f"{abs(cols)} {right if cols > 0 else left}"] if cols else []
        return " and ".join(parts)

    def default_instruction(self) -> str:
        return (
            "You are solving the Sokoban puzzle. You are the player and must push every box onto a target. "
            "You can push a box but not pull it, and you cannot push a box into a wall or another box."
        )

    def instruction_extras(self) -> str:
        legend = ", ".join(f"{symbol}: {meaning}" for symbol, meaning in self.config.grid_vocab.items())
        actions = super().instruction_extras()
        return f"Symbols: {legend}.\n{actions}" if legend else actions

    def optimal_answer(self) -> Optional[str]:
        """Next move of a shortest solution (BFS; the plan is cached along its path)."""
        state = (self.player, self.boxes)
        if state not in self._plan:
            moves = solve(self.fixed, self.cols, self.player, self.boxes)
            if not moves:
                return None
            self._plan = {}
            player, boxes = state
            for direction in moves:
                self._plan[(player, boxes)] = direction
                player, boxes, _ = push(self.fixed, self.cols, player, boxes, direction)
        return self._names[self._plan[state]]
