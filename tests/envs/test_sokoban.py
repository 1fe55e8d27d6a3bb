"""Sokoban: generated rooms are solvable within the step budget, determinism, push rules, rewards."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.sokoban.room import solve

REPO = Path(__file__).resolve().parents[2]
SYMBOLS = {"#": 0, "_": 1, "O": 2, "√": 3, "X": 4, "P": 5, "S": 6}  # default grid_lookup, inverted


def parse_room(text: str):
    """Rebuild (fixed cells, cols, player, boxes) from rendered text: the solver runs on what the
    model sees, not on env internals."""
    rows = text.split("\n")
    cols = len(rows[0])
    fixed, boxes, player = [], set(), None
    for i, ch in enumerate("".join(rows)):
        code = SYMBOLS[ch]
        fixed.append({0: 0, 1: 1, 2: 2, 3: 2, 4: 1, 5: 1, 6: 2}[code])
        if code in (3, 4):
            boxes.add(i)
        if code in (5, 6):
            player = i
    return tuple(fixed), cols, player, frozenset(boxes)


@pytest.mark.parametrize(
    "dim_room, num_boxes, max_steps, seeds",
    [((6, 6), 1, 10, 300), ((6, 6), 1, 100, 200), ((7, 7), 2, 20, 100), ((10, 10), 2, 10, 60)],
)
def test_every_room_is_solved_by_the_solver_within_its_step_budget(dim_room, num_boxes, max_steps, seeds):
    env = make_env("sokoban", dim_room=list(dim_room), num_boxes=num_boxes, max_steps=max_steps)
    rooms, lengths = set(), []
    for seed in range(seeds):
        obs, _ = env.reset(seed=seed)
        fixed, cols, player, boxes = parse_room(obs)
        assert len(obs.split("\n")) == dim_room[0] and cols == dim_room[1]
        assert len(boxes) == num_boxes and not any(fixed[b] == 2 for b in boxes)  # nothing pre-solved
        plan = solve(fixed, cols, player, boxes, max_moves=max_steps)
        assert plan is not None, f"seed {seed} not solvable in {max_steps} moves:\n{obs}"
        assert len(plan) == env.optimal_moves  # the generator knows the exact optimum
        rooms.add(obs)
        lengths.append(len(plan))
    assert len(rooms) >= 0.95 * seeds
    assert len(set(lengths)) >= 3  # a spread of difficulties, not one length


def test_playing_the_solver_plan_collects_the_documented_rewards():
    env = make_env("sokoban", dim_room=[7, 7], num_boxes=2, max_steps=40)
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        fixed, cols, player, boxes = parse_room(obs)
        plan = solve(fixed, cols, player, boxes)
        total = 0.0
        for k, direction in enumerate(plan):
            before = obs.count("√")
            obs, reward, term, trunc, info = env.step(f"<answer>{['Up', 'Down', 'Left', 'Right'][direction]}</answer>")
            after = obs.count("√")
            expected = -0.1 + (after > before) * 1.0 - (after < before) * 1.0 + (10.0 if after == 2 else 0.0)
            assert reward == pytest.approx(expected)
            assert info["metrics"]["boxes_on_target"] == after
            total += reward
            assert term == (k == len(plan) - 1)
        assert info["metrics"]["success"] == 1.0 and not trunc
        # boxes start off target and end on: pushes on minus pushes off is 2, whatever the route
        assert total == pytest.approx(-0.1 * len(plan) + 2 * 1.0 + 10.0)


def test_push_rules_walls_and_box_chains_block():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1)
    env.reset(seed=0)
    # A hand-made position: row 2 is "#PXX_#" -> pushing right moves two boxes: blocked.
    env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
    env.targets = frozenset({16})
    env.player, env.boxes = 7, frozenset({8, 9})
    before = env.render()
    obs, reward, term, _, info = env.step("<answer>Right</answer>")
    assert obs == before and reward == pytest.approx(-0.1) and info["metrics"]["action_is_effective"] == 0.0
    obs, _, _, _, info = env.step("<answer>Up</answer>")  # into the outer wall
    assert obs == before and info["metrics"]["action_is_effective"] == 0.0
    env.boxes = frozenset({8})
    obs, reward, _, _, info = env.step("<answer>Right</answer>")  # a single box moves
    assert obs.split("\n")[1] == "#_PX_#" and info["metrics"]["action_is_effective"] == 1.0


def test_surroundings_lines_say_what_each_move_does_and_where_the_box_and_its_target_are():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, describe_surroundings=True)
    env.reset(seed=0)
    # Row 1 "#PXX_#", row 2 "#___O#": two boxes in a row to the right (blocked), one target.
    env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
    env.targets = frozenset({16})
    env.player, env.boxes = 7, frozenset({8, 9})
    lines = env.render().split("\n")
    assert lines[:3] == ["######", "#PXX_#", "#___O#"]
    assert lines[6:] == [
        "Up: wall, Down: floor, Left: wall, Right: box (blocked).",
        "Box: 1 right from you; its target: 1 down and 2 right from the box.",
        "Box: 2 right from you; its target: 1 down and 1 right from the box.",
    ]
    env.boxes = frozenset({9})
    env.player = 14  # row 2, col 2: the box is up and to the right; the target two cells right
    assert env.render().split("\n")[6:] == [
        "Up: floor, Down: floor, Left: floor, Right: floor.",
        "Box: 1 up and 1 right from you; its target: 1 down and 1 right from the box.",
    ]
    env.player = 7
    env.boxes = frozenset({8})
    obs, _, _, _, _ = env.step("<answer>Right</answer>")  # the box goes to column 3, floor beyond it
    assert obs.split("\n")[6:] == [
        "Up: wall, Down: floor, Left: floor, Right: box (can push).",
        "Box: 1 right from you; its target: 1 down and 1 right from the box.",
    ]
    obs, _, _, _, _ = env.step("<answer>Right</answer>")  # now against the right wall, above its target
    assert obs.split("\n")[6:] == [
        "Up: wall, Down: floor, Left: floor, Right: box (blocked).",
        "Box: 1 right from you; its target: 1 down from the box.",
    ]
    plain = make_env("sokoban", dim_room=[6, 6], num_boxes=1)
    assert len(plain.reset(seed=0)[0].split("\n")) == 6  # off by default, as in ROLL
    with pytest.raises(ValueError, match="describe_surroundings"):
        make_env("sokoban", describe_surroundings="yes")


def test_last_move_line_says_what_the_last_turn_did_and_leaves_the_state_key_alone():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, describe_last_move=True)
    first, _ = env.reset(seed=0)
    assert "Last" not in first  # nothing played yet
    # Row 1 "#PX__#": the box can go right; the outer wall is above the player.
    env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
    env.targets = frozenset({16})
    env.player, env.boxes = 7, frozenset({8})
    key = env.state_key()
    obs, _, _, _, _ = env.step("<answer>Up</answer>")
    assert obs.split("\n")[:6] == env.render().split("\n") and obs.split("\n")[-1] == "Last move: Up; nothing changed."
    assert env.state_key() == key  # same room, so GiGPO still groups this turn with the first
    obs, _, _, _, _ = env.step("I push right")
    assert obs.split("\n")[-1] == "Last reply: no valid move."
    obs, _, _, _, _ = env.step("<answer>right</answer>")
    assert obs.split("\n")[1:2] == ["#_PX_#"] and obs.split("\n")[-1] == "Last move: Right."
    again, _ = env.reset(seed=0)
    assert again == first
    plain = make_env("sokoban", dim_room=[6, 6], num_boxes=1)
    plain.reset(seed=0)
    assert plain.step("<answer>Up</answer>")[0] == plain.render()  # off by default, as in ROLL
    with pytest.raises(ValueError, match="describe_last_move"):
        make_env("sokoban", describe_last_move="yes")


def test_pushing_a_box_off_its_target_costs_one():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=2, max_steps=50)
    env.reset(seed=0)
    env.fixed = tuple([0] * 6 + [0, 1, 2, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
    env.targets = frozenset({8, 16})
    env.player, env.boxes = 7, frozenset({8, 20})
    obs, reward, term, _, _ = env.step("<answer>Right</answer>")
    assert reward == pytest.approx(-1.1) and not term and obs.split("\n")[1] == "#_SX_#"


def test_same_seed_same_room_across_processes_and_seeds_differ():
    code = (
        "from roll.agentic.env import make_env\n"
        "e = make_env('sokoban', dim_room=[8, 8], num_boxes=2, max_steps=20)\n"
        "print(repr([e.reset(seed=s)[0] for s in (4, 5)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    env = make_env("sokoban", dim_room=[8, 8], num_boxes=2, max_steps=20)
    rooms = [env.reset(seed=s)[0] for s in (4, 5)]
    assert out == repr(rooms) + "\n" and rooms[0] != rooms[1]


def test_rolls_different_grid_vocab_example_renders_with_its_symbols():
    lookup = {0: "W", 1: ".", 2: "G", 3: "C", 4: "B", 5: "A", 6: "@"}
    vocab = {"W": "wall", ".": "empty", "G": "target", "C": "box on target", "B": "box", "A": "player",
             "@": "player on target"}
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, search_depth=30, max_steps=10,
                   grid_lookup=lookup, grid_vocab=vocab, format_penalty=-0.15)
    plain = make_env("sokoban", dim_room=[6, 6], num_boxes=1, search_depth=30, max_steps=10)
    obs, info = env.reset(seed=9)
    translate = {v: k for k, v in lookup.items()}
    default = {0: "#", 1: "_", 2: "O", 3: "√", 4: "X", 5: "P", 6: "S"}
    assert "".join(default.get(translate.get(ch), ch) for ch in obs) == plain.reset(seed=9)[0]
    assert "B: box" in info["env_instruction"]


def test_dim_x_dim_y_override_dim_room():
    env = make_env("sokoban", dim_x=5, dim_y=8, num_boxes=1)
    rows = env.reset(seed=0)[0].split("\n")
    assert (len(rows), len(rows[0])) == (5, 8)


def test_cell_separator_separates_every_cell_and_must_stay_on_one_line():
    spaced = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=10, cell_separator=" ")
    plain = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=10)
    spaced_rows = spaced.reset(seed=3)[0].split("\n")
    plain_rows = plain.reset(seed=3)[0].split("\n")
    assert [row.split(" ") for row in spaced_rows] == [list(row) for row in plain_rows]
    with pytest.raises(ValueError, match="env_config.cell_separator"):
        make_env("sokoban", cell_separator="\n")


def test_progress_reward_pays_each_cell_of_work_saved_and_a_round_trip_nets_nothing():
    def room(**config):
        """Row 1 "#P___#", row 2 "#_X_O#", rows 3-4 floor: the box 2 left of its target, the player 1
        up-left of the box (work left: box 2 + player 2 - 1 = 3)."""
        env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=50, **config)
        env.reset(seed=0)
        env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
        env.targets, env.player, env.boxes = frozenset({16}), 7, frozenset({14})
        return env

    env = room(progress_reward=0.2)
    assert env.work_left() == 3
    steps = [  # (move, reward): -0.1 a move, ±0.2 per cell of work saved or added
        ("Down", -0.1 + 0.2),  # now beside the box: 3 -> 2
        ("Up", -0.1 - 0.2),  # back: 2 -> 3
        ("Down", -0.1 + 0.2),
        ("Up", -0.1 - 0.2),  # a round trip, twice: each nets only the two moves' -0.2
        ("Down", -0.1 + 0.2),
        ("Left", -0.1),  # into the wall: nothing moved, no progress term
        ("Right", -0.1 + 0.2),  # pushes the box 1 closer: 2 -> 1
        ("Right", -0.1 + 0.2 + 1.0 + 10.0),  # onto the target: solved, 1 -> 0
    ]
    for move, expected in steps:
        _, reward, term, _, _ = env.step(f"<answer>{move}</answer>")
        assert reward == pytest.approx(expected), move
    assert term and env.work_left() == 0
    assert room().step("<answer>Down</answer>")[1] == pytest.approx(-0.1)  # off by default, as in ROLL
    with pytest.raises(ValueError, match="progress_reward"):
        make_env("sokoban", progress_reward="high")


def test_path_progress_pays_moves_of_a_shortest_solution_and_nothing_once_the_room_is_lost():
    def room(**config):
        """As above: row 1 "#P___#", row 2 "#_X_O#", rows 3-4 floor; a shortest solution is Down, Right,
        Right (3 moves)."""
        env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=50, **{"progress_reward": 0.2, **config})
        env.reset(seed=0)
        env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
        env.targets, env.player, env.boxes = frozenset({16}), 7, frozenset({14})
        return env

    def rewards(env, moves):
        return [env.step(f"<answer>{move}</answer>")[1] for move in moves]

    # Right puts the player above the box: one cell nearer it (Manhattan pays) but one move further
    # from the push position (4 moves left instead of 3: path charges)
    assert rewards(room(), ["Right"]) == pytest.approx([-0.1 + 0.2])
    assert rewards(room(progress_measure="path"), ["Right", "Left"]) == pytest.approx([-0.1 - 0.2, -0.1 + 0.2])
    env = room(progress_measure="path")
    assert env.moves_left() == 3
    lost = rewards(env, ["Down", "Down", "Right", "Up", "Left"])
    # beside the box (2 left), below that (3), below the box (4); Up pushes it against the top wall,
    # where it can never reach the target's row: no progress for that move or any after it
    assert lost == pytest.approx([-0.1 + 0.2, -0.1 - 0.2, -0.1 - 0.2, -0.1, -0.1])
    assert env.moves_left() is None
    assert rewards(room(progress_measure="path"), ["Down", "Right", "Right"]) == pytest.approx(
        [-0.1 + 0.2, -0.1 + 0.2, -0.1 + 0.2 + 1.0 + 10.0])
    # lost_room_penalty charges the push that loses the room, once: not the walk before it, not the
    # moves after it; with either progress measure
    for measure in ("path", "manhattan"):
        env = room(progress_measure=measure, progress_reward=0.0, lost_room_penalty=-2.0)
        assert rewards(env, ["Down", "Down", "Right", "Up", "Left", "Down"]) == pytest.approx(
            [-0.1, -0.1, -0.1, -0.1 - 2.0, -0.1, -0.1])
    with pytest.raises(ValueError, match="lost_room_penalty"):
        make_env("sokoban", lost_room_penalty="high")
    with pytest.raises(ValueError, match="progress_measure.*'manhattan'"):
        make_env("sokoban", progress_measure="solver")


def _walkable(fixed, cols, start, boxes):
    """Cells reached from start without pushing, by flood fill here (not the env's helper)."""
    seen, todo = {start}, [start]
    while todo:
        cell = todo.pop()
        for nxt in (cell - cols, cell + cols, cell - 1, cell + 1):
            if fixed[nxt] != 0 and nxt not in boxes and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_random_start_walks_the_player_away_from_the_box_and_keeps_the_room_solvable():
    settings = dict(dim_room=[6, 6], num_boxes=1, search_depth=2, max_steps=8)
    generated, moved = make_env("sokoban", **settings), make_env("sokoban", **settings, random_start=True)
    moved_rooms, lengths = 0, {"generated": 0, "random_start": 0}
    for seed in range(60):
        fixed, cols, player, boxes = parse_room(generated.reset(seed=seed)[0])
        obs = moved.reset(seed=seed)[0]
        fixed2, _, player2, boxes2 = parse_room(obs)
        assert (fixed2, boxes2) == (fixed, boxes)  # same walls, targets and box: only the player moved
        assert player2 in _walkable(fixed, cols, player, boxes)  # reached by walking, no push
        plan = solve(fixed, cols, player2, boxes, max_moves=8)
        assert plan is not None and len(plan) == moved.optimal_moves <= 8, obs
        moved_rooms += player2 != player
        lengths["generated"] += generated.optimal_moves
        lengths["random_start"] += moved.optimal_moves
    assert moved_rooms >= 30
    assert lengths["random_start"] >= lengths["generated"] + 60  # a walk first: over a move longer on average
    assert make_env("sokoban", **settings, random_start=True).reset(seed=7)[0] == moved.reset(seed=7)[0]
    with pytest.raises(ValueError, match="random_start"):
        make_env("sokoban", **settings, random_start="yes")


def test_push_line_names_an_open_push_towards_the_target_and_where_to_stand_for_it():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, describe_surroundings=True, describe_push=True)
    env.reset(seed=0)
    # the room of the surroundings test, one target at row 2, col 4
    env.fixed = tuple([0] * 6 + [0, 1, 1, 1, 1, 0] + [0, 1, 1, 1, 2, 0] + [0, 1, 1, 1, 1, 0] * 2 + [0] * 6)
    env.targets = frozenset({16})

    def push_line(player: int, box: int) -> str:
        env.player, env.boxes = player, frozenset({box})
        return env.render().split("\n")[-1]

    # box at row 1, col 2: the push down would need the wall above it; the push right is open, from the player's cell
    assert push_line(7, 8) == "Push it Right: you stand there."
    assert push_line(7, 15) == "Push it Right: stand 1 down and 1 right from you."  # level with the target: its row
    assert push_line(7, 22) == "Push it Up: stand 3 down and 3 right from you."  # below the target: its column first
    # in the bottom-left corner neither push is open (a wall behind each): the column's is named
    assert push_line(7, 25) == "Push it Up: stand 4 down from you."
    env.player, env.boxes = 7, frozenset({8})
    obs, _, _, _, _ = env.step("<answer>Right</answer>")  # the named push moves the box one cell right
    assert env.boxes == frozenset({9}) and obs.split("\n")[-1] == "Push it Right: you stand there."
    with pytest.raises(ValueError, match="describe_surroundings"):
        make_env("sokoban", describe_push=True)
    with pytest.raises(ValueError, match="describe_push"):
        make_env("sokoban", describe_surroundings=True, describe_push="yes")


def test_push_line_on_generated_rooms_stands_behind_the_box_and_pushes_it_closer():
    """On 200 generated rooms, read from the text alone: the named cell is the one behind the box for the
    named push, and that push brings the box a cell closer to its target."""
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=10, describe_surroundings=True, describe_push=True)
    steps = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
    for seed in range(200):
        text, _ = env.reset(seed=seed)
        lines = text.split("\n")
        fixed, cols, player, boxes = parse_room("\n".join(lines[:6]).replace(" ", ""))
        (box,) = boxes
        (target,) = [i for i, cell in enumerate(fixed) if cell == 2]
        name, where = lines[-1].removeprefix("Push it ").rstrip(".").split(": ")
        offset = [0, 0]  # "you stand there" names no count
        for count, word in re.findall(r"(\d+) (up|down|left|right)", where):
            offset[0] += int(count) * steps[word.capitalize()][0]
            offset[1] += int(count) * steps[word.capitalize()][1]
        dr, dc = steps[name]
        stand = (player // cols + offset[0], player % cols + offset[1])
        assert stand == (box // cols - dr, box % cols - dc), (seed, lines)
        ahead = (box // cols + dr, box % cols + dc)
        distance = lambda r, c: abs(r - target // cols) + abs(c - target % cols)
        assert distance(*ahead) == distance(box // cols, box % cols) - 1, (seed, lines)
