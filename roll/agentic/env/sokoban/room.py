"""Sokoban rooms: generation by reverse play, the push rule, and a BFS solver.

A room is a flat tuple of fixed cells (wall / empty / target, row-major), the box cells and the
player cell. The outer ring is always wall, so a flat index step of +-1 or +-cols never leaves the
grid.

Why reverse play makes every room solvable: the generator starts from the solved positions (boxes
on targets) and plays moves backwards, where a move may *pull* the box behind the player. Each
backward move undoes exactly one legal forward move (a pull undoes a push), so replaying a
backward path in reverse order solves the room in as many moves as the path took. Searching
backwards breadth-first also tells the exact optimal length, and bounding its depth by the episode's
step budget guarantees that a good player can finish every room.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Optional

from roll.agentic.env.sokoban.config import EMPTY, TARGET, WALL

FLOOR_FRACTION = 0.6  # share of interior cells carved to floor: open enough to push, walled enough to plan
MAX_SEARCH_STATES = 30_000  # caps generation time for big rooms; the deepest full layer is used
MAX_ROOM_TRIES = 200


@dataclass(frozen=True)
class Room:
    rows: int
    cols: int
    fixed: tuple[int, ...]
    boxes: frozenset[int]
    player: int
    optimal_moves: int  # length of a shortest solution (from the reverse search)

    @property
    def targets(self) -> frozenset[int]:
        return frozenset(i for i, cell in enumerate(self.fixed) if cell == TARGET)


def deltas(cols: int) -> tuple[int, int, int, int]:
    """Flat-index steps for up, down, left, right."""
    return (-cols, cols, -1, 1)


def push(
    fixed: tuple[int, ...], cols: int, player: int, boxes: frozenset[int], direction: int
) -> Optional[tuple[int, frozenset[int], Optional[int]]]:
    """Sokoban's move rule: (new player, new boxes, cell a box was pushed to) or None if blocked."""
    step = deltas(cols)[direction]
    nxt = player + step
    if fixed[nxt] == WALL:
        return None
    if nxt not in boxes:
        return nxt, boxes, None
    beyond = nxt + step
    if fixed[beyond] == WALL or beyond in boxes:
        return None
    return nxt, (boxes - {nxt}) | {beyond}, beyond


def walkable_from(fixed: tuple[int, ...], cols: int, player: int, boxes: frozenset[int]) -> list[int]:
    """The cells the player reaches without pushing a box (its own included), in index order."""
    seen, queue = {player}, deque([player])
    while queue:
        cell = queue.popleft()
        for step in deltas(cols):
            nxt = cell + step
            if fixed[nxt] != WALL and nxt not in boxes and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return sorted(seen)


def _carve(rows: int, cols: int, want: int, rng: random.Random) -> set[int]:
    """Random walk over the interior, turning now and then; the visited cells are floor (connected)."""
    r, c = rng.randrange(1, rows - 1), rng.randrange(1, cols - 1)
    dr, dc = rng.choice(((-1, 0), (1, 0), (0, -1), (0, 1)))
    floor = {r * cols + c}
    for _ in range(want * 50):
        if len(floor) >= want:
            break
        if rng.random() < 0.35:
            dr, dc = rng.choice(((-1, 0), (1, 0), (0, -1), (0, 1)))
        if 1 <= r + dr < rows - 1 and 1 <= c + dc < cols - 1:
            r, c = r + dr, c + dc
            floor.add(r * cols + c)
        else:
            dr, dc = rng.choice(((-1, 0), (1, 0), (0, -1), (0, 1)))
    return floor


def _reverse_search(
    fixed: tuple[int, ...], cols: int, targets: frozenset[int], depth: int, rng: random.Random
) -> Optional[tuple[int, frozenset[int], int]]:
    """Breadth-first reverse play from every solved position (boxes on targets, player anywhere).

    Layer k of this search holds exactly the positions whose optimal solution takes k moves, so the
    returned position (player, boxes, k) is solvable in k <= ``depth`` moves and in no fewer. It is
    drawn from the deeper half of the layers that hold positions with every box off its target, so
    rooms are neither trivial nor all of one length."""
    # A position is one int, boxes bitmask << shift | player: hashing and copying ints is several
    # times faster than (player, frozenset) tuples, and this loop is the generator's whole cost.
    shift = len(fixed).bit_length()
    player_mask = (1 << shift) - 1
    target_bits = sum(1 << t for t in targets)
    wall = [cell == WALL for cell in fixed]
    layer = [target_bits << shift | p for p, is_wall in enumerate(wall) if not is_wall and p not in targets]
    seen = set(layer)
    layers: list[list[int]] = []
    steps = deltas(cols)
    for _ in range(depth):
        if len(seen) > MAX_SEARCH_STATES:
            break
        nxt_layer = []
        for state in layer:
            player, boxes = state & player_mask, state >> shift
            for step in steps:
                nxt = player + step
                if wall[nxt] or boxes >> nxt & 1:
                    continue
                children = [boxes << shift | nxt]
                behind = player - step
                if boxes >> behind & 1:  # pull the box behind the player onto the player's cell
                    children.append((boxes ^ (1 << behind) | (1 << player)) << shift | nxt)
                for child in children:
                    if child not in seen:
                        seen.add(child)
                        nxt_layer.append(child)
        if not nxt_layer:
            break
        layers.append([state for state in nxt_layer if not (state >> shift) & target_bits])
        layer = nxt_layer
    deepest = max((k for k, states in enumerate(layers) if states), default=None)
    if deepest is None:
        return None
    chosen = rng.randrange(deepest // 2, deepest + 1)
    while not layers[chosen]:
        chosen += 1
    state = rng.choice(layers[chosen])
    boxes = frozenset(i for i in range(len(fixed)) if state >> shift >> i & 1)
    return state & player_mask, boxes, chosen + 1


def generate_room(rows: int, cols: int, num_boxes: int, depth: int, rng: random.Random) -> Room:
    """A random room with ``num_boxes`` boxes whose optimal solution takes between 1 and ``depth`` moves."""
    interior = (rows - 2) * (cols - 2)
    want = max(num_boxes + 3, round(interior * FLOOR_FRACTION))
    for _ in range(MAX_ROOM_TRIES):
        floor = _carve(rows, cols, min(want, interior), rng)
        if len(floor) < num_boxes + 2:
            continue
        cells = sorted(floor)
        targets = rng.sample(cells, num_boxes)
        fixed = tuple(
            TARGET if i in targets else EMPTY if i in floor else WALL for i in range(rows * cols)
        )
        found = _reverse_search(fixed, cols, frozenset(targets), depth, rng)
        if found is not None:
            player, boxes, moves = found
            return Room(rows, cols, fixed, boxes, player, moves)
    raise RuntimeError(
        f"could not generate a {rows}x{cols} Sokoban room with {num_boxes} boxes in {MAX_ROOM_TRIES} tries "
        f"(search depth {depth}); use a larger room, fewer boxes or a larger search_depth/max_steps"
    )


def _dead_cells(fixed: tuple[int, ...], cols: int) -> frozenset[int]:
    """Non-target cells in a corner: a box pushed there can never move again."""
    up, down, left, right = deltas(cols)
    dead = set()
    for i, cell in enumerate(fixed):
        if cell != EMPTY:
            continue
        vertical = fixed[i + up] == WALL or fixed[i + down] == WALL
        horizontal = fixed[i + left] == WALL or fixed[i + right] == WALL
        if vertical and horizontal:
            dead.add(i)
    return frozenset(dead)


def solve(
    fixed: tuple[int, ...], cols: int, player: int, boxes: frozenset[int], max_moves: Optional[int] = None
) -> Optional[list[int]]:
    """Breadth-first search: a shortest list of directions (0 up, 1 down, 2 left, 3 right) that puts
    every box on a target, or None if none exists within ``max_moves``."""
    targets = frozenset(i for i, cell in enumerate(fixed) if cell == TARGET)
    dead = _dead_cells(fixed, cols)
    start = (player, boxes)
    parent: dict[tuple[int, frozenset[int]], Optional[tuple[tuple[int, frozenset[int]], int]]] = {start: None}
    if boxes == targets:
        return []
    frontier, depth = deque([start]), 0
    while frontier:
        if max_moves is not None and depth >= max_moves:
            return None
        next_frontier: deque = deque()
        for state in frontier:
            for direction in range(4):
                moved = push(fixed, cols, state[0], state[1], direction)
                if moved is None or moved[2] in dead:
                    continue
                child = (moved[0], moved[1])
                if child in parent:
                    continue
                parent[child] = (state, direction)
                if moved[2] is not None and moved[1] == targets:
                    return _path(parent, child)
                next_frontier.append(child)
        frontier, depth = next_frontier, depth + 1
    return None


def _path(parent: dict, state: tuple[int, frozenset[int]]) -> list[int]:
    moves = []
    while parent[state] is not None:
        state, direction = parent[state]
        moves.append(direction)
    return moves[::-1]
