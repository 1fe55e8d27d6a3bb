"""What a Sokoban agent did in one saved rollout: each valid move measured against the solver, from
the room shown at that turn, whatever rewards the run used.

    python benchmarks/sokoban_moves.py output/<exp_name>/logs/trajectories/val_00009.json [more files]

For each turn whose room could still be solved, the move is one of:
- along a shortest solution: the solver's move count from the new room is one less;
- into a wall: nothing moved (a wall, or a box that cannot be pushed);
- a detour: the room stays solvable but the count did not drop;
- loses the room: no push sequence solves it any more (a box in a corner, say).
Turns after the room was lost are counted apart. Beside each share, what a uniform random move would
score at the same turns: an agent that reads the room beats it on the first share and on walls.
The first move of each episode is counted apart too (the policy's reading of a fresh room, before
repeats pile up on later turns). Two more lines: success by the moves a shortest solution of the first
room needs (the short rooms are the ones a curriculum trains on), and how often a move that changed
nothing was answered with the same move (a one-turn prompt shows the same room again, so a policy that
does not vary repeats it).
Turns a run's `random_action_rate` played (the trajectory's `random_turns`) are left out of the moves
and shares, which measure the policy; success counts every episode.
Reads the default symbols (`#`, `_`, `O`, `√`, `X`, `P`, `S`), with or without `cell_separator: " "`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roll.agentic.env.sokoban.config import BOX, BOX_ON_TARGET, EMPTY, PLAYER, PLAYER_ON_TARGET, TARGET, WALL  # noqa: E402
from roll.agentic.env.sokoban.room import push, solve  # noqa: E402

SYMBOLS = {"#": WALL, "_": EMPTY, "O": TARGET, "√": BOX_ON_TARGET, "X": BOX, "P": PLAYER, "S": PLAYER_ON_TARGET}
DIRECTIONS = ("Up", "Down", "Left", "Right")  # room.push's order
KINDS = ("along a shortest solution", "into a wall", "a detour", "loses the room")


def parse_room(board: str) -> tuple[tuple[int, ...], int, int, frozenset[int]]:
    """(fixed cells: wall / floor / target, columns, player, boxes) from the grid lines of a board."""
    split = [line.split(" ") if " " in line else list(line) for line in board.splitlines()]
    rows = [cells for cells in split if cells and all(cell in SYMBOLS for cell in cells)]
    cols = len(rows[0])
    cells = [SYMBOLS[c] for row in rows for c in row]
    fixed = tuple(TARGET if c in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET) else WALL if c == WALL else EMPTY
                  for c in cells)
    player = next(i for i, c in enumerate(cells) if c in (PLAYER, PLAYER_ON_TARGET))
    boxes = frozenset(i for i, c in enumerate(cells) if c in (BOX, BOX_ON_TARGET))
    return fixed, cols, player, boxes


def move_kinds(room: tuple[tuple[int, ...], int, int, frozenset[int]]) -> dict[str, str] | None:
    """Which of KINDS each of the four moves is in `room` (parse_room's tuple); None when the room is
    already lost. The room is solved once, for the agent's move and the baseline's alike."""
    fixed, cols, player, boxes = room
    before = solve(fixed, cols, player, boxes)
    if before is None:
        return None
    kinds = {}
    for index, direction in enumerate(DIRECTIONS):
        moved = push(fixed, cols, player, boxes, index)
        after = None if moved is None else solve(fixed, cols, moved[0], moved[1])
        kinds[direction] = ("into a wall" if moved is None else "loses the room" if after is None
                            else "along a shortest solution" if len(after) == len(before) - 1 else "a detour")
    return kinds


def _numbers_first(item: tuple[int | str, object]) -> tuple[bool, int | str]:
    return isinstance(item[0], str), item[0] if isinstance(item[0], int) else 0


def move_report(episodes: list[dict]) -> dict[str, object]:
    """Counts over the episodes' turns (a step-wise run saves one entry per turn; step_index 0 holds the
    whole episode)."""
    whole = [episode for episode in episodes if episode.get("step_index", 0) == 0]
    kinds, moves, uniform, opening = Counter(), Counter(), Counter(), Counter()
    by_length: dict[int | str, list[float]] = {}
    repeats = after_idle = 0
    for episode in whole:
        first = solve(*parse_room(episode["turns"][0]["board"])) if episode["turns"] else None
        length = "unsolvable" if first is None else len(first)
        by_length.setdefault(length, []).append(float(episode["env_metrics"].get("success", 0.0)))
        last_valid = None  # (room, action) of the previous turn when that turn was a valid move
        random_turns = set(episode.get("random_turns") or ())
        for index, turn in enumerate(episode["turns"]):
            policy = index not in random_turns  # a random_action_rate turn moves the room, but is not the policy's
            if policy:
                moves[turn["action"] if turn["valid"] else "invalid"] += 1
            if not turn["valid"]:
                last_valid = None
                continue
            room = parse_room(turn["board"])  # the grid only: describe_last_move's line is not the room
            if policy and last_valid is not None and last_valid[0] == room:
                after_idle += 1  # the previous move changed nothing: the same room is shown again
                repeats += turn["action"] == last_valid[1]
            last_valid = (room, turn["action"])
            if not policy:
                continue
            options = move_kinds(room)
            if options is None:
                kinds["room already lost"] += 1
                continue
            kinds[options[turn["action"]]] += 1
            if index == 0:
                opening[options[turn["action"]]] += 1
            for kind in options.values():  # the baseline: a uniform random move at the same turn
                uniform[kind] += 0.25
    solvable = sum(kinds[k] for k in KINDS)
    report: dict[str, object] = {
        "episodes": len(whole),
        "success": sum(float(e["env_metrics"].get("success", 0.0)) for e in whole) / max(len(whole), 1),
        "moves": dict(moves),
        "success by moves needed": {n: f"{sum(v):.0f}/{len(v)}" for n, v in sorted(by_length.items(), key=_numbers_first)},
        "valid moves in a solvable room": solvable,
    }
    for kind in KINDS:
        report[f"share {kind}"] = f"{kinds[kind] / max(solvable, 1):.3f} (uniform random move: {uniform[kind] / max(solvable, 1):.3f})"
    first_moves = sum(opening.values())
    # the first turn alone: what the policy reads from a fresh room, before any repeat can pile up
    report["first move along a shortest solution"] = f"{opening[KINDS[0]] / max(first_moves, 1):.3f} of {first_moves}"
    report["valid moves after the room was lost"] = kinds["room already lost"]
    report["same move again after one that changed nothing"] = f"{repeats} of {after_idle}"
    return report


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for path in argv:
        print(path)
        for key, value in move_report(json.loads(Path(path).read_text())).items():
            print(f"  {key:50s} {value:.3f}" if isinstance(value, float) else f"  {key:50s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
