"""FrozenLake: solvable maps, determinism, gymnasium parity, slipping, rewards, render symbols."""

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.frozen_lake.env import has_goalward_hole, shortest_path_moves

REPO = Path(__file__).resolve().parents[2]
LETTER_OF = {"P": "F", "_": "F", "O": "H", "G": "G"}  # ROLL symbols at reset (player on start)


def read_map(env) -> list[str]:
    """The map as gymnasium letters, read back from the rendered text (not from env internals)."""
    rows = env.render().split("\n")
    return ["".join(LETTER_OF[ch] for ch in row) for row in rows]


def reachable(desc: list[str]) -> bool:
    """Independent flood fill from the top-left to the goal."""
    n_rows, n_cols = len(desc), len(desc[0])
    seen, todo = {(0, 0)}, [(0, 0)]
    while todo:
        r, c = todo.pop()
        if desc[r][c] == "G":
            return True
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < n_rows and 0 <= nc < n_cols and (nr, nc) not in seen and desc[nr][nc] != "H":
                seen.add((nr, nc))
                todo.append((nr, nc))
    return False


# A 4x4 map has only 14 random tiles (many seeds give the all-frozen map), so only bigger maps
# must all differ.
@pytest.mark.parametrize("size, p, min_distinct", [(4, 0.8, 150), (6, 0.6, 299), (8, 0.8, 299)])
def test_every_generated_map_has_a_path(size, p, min_distinct):
    env = make_env("frozen_lake", size=size, p=p)
    maps = set()
    for seed in range(300):
        obs, _ = env.reset(seed=seed)
        desc = read_map(env)
        assert len(desc) == size and all(len(row) == size for row in desc)
        assert obs.split("\n")[0][0] == "P" and desc[-1][-1] == "G"
        assert reachable(desc), (seed, desc)
        maps.add(obs)
    assert len(maps) >= min_distinct  # different seeds, different maps


def test_same_seed_same_map_and_same_slippery_episode():
    def episode(seed):
        env = make_env("frozen_lake", size=5, is_slippery=True, max_steps=30)
        frames = [env.reset(seed=seed)[0]]
        rng = random.Random(0)
        for _ in range(30):
            obs, _, term, trunc, _ = env.step(f"<answer>{rng.choice(['Left', 'Down', 'Right', 'Up'])}</answer>")
            frames.append(obs)
            if term or trunc:
                break
        return frames

    assert episode(11) == episode(11)
    assert episode(11)[0] != episode(12)[0]


def test_same_seed_same_map_across_processes():
    code = (
        "from roll.agentic.env import make_env\n"
        "e = make_env('frozen_lake', size=6)\n"
        "print(repr([e.reset(seed=s)[0] for s in (1, 2, 3)]))"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    env = make_env("frozen_lake", size=6)
    assert runs[0] == runs[1] == repr([env.reset(seed=s)[0] for s in (1, 2, 3)]) + "\n"


def test_non_slippery_dynamics_match_gymnasium_on_the_same_map():
    gym = pytest.importorskip("gymnasium")
    names = ["Left", "Down", "Right", "Up"]  # gymnasium's action ids 0..3
    rng = random.Random(5)
    for seed in range(60):
        env = make_env("frozen_lake", size=rng.choice([4, 5, 7]), p=0.7, is_slippery=False, max_steps=50)
        env.reset(seed=seed)
        desc = read_map(env)
        desc[0] = "S" + desc[0][1:]
        ref = gym.make("FrozenLake-v1", desc=desc, is_slippery=False)
        ref_state, _ = ref.reset(seed=seed)
        for _ in range(40):
            action = rng.randrange(4)
            ref_state, ref_reward, ref_term, ref_trunc, _ = ref.step(action)
            obs, reward, term, trunc, info = env.step(f"<answer>{names[action]}</answer>")
            rows = obs.split("\n")
            player = [(r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch in "PX√"]
            assert player == [divmod(ref_state, len(desc[0]))]
            assert (reward, term) == (ref_reward, ref_term)
            assert info["metrics"]["success"] == float(ref_reward == 1.0)
            if term or trunc:
                break
        ref.close()


def test_slipping_goes_each_allowed_way_about_a_third_of_the_time():
    desc = ["FFFFF", "FFFFF", "FFSFF", "FFFFF", "FFFFG"]
    env = make_env("frozen_lake", desc=desc, is_slippery=True)
    landed = Counter()
    for seed in range(1500):
        env.reset(seed=seed)
        obs = env.step("<answer>Down</answer>")[0]
        rows = obs.split("\n")
        landed[next((r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch == "P")] += 1
    # Down from (2, 2) slips to Left (2, 1) or Right (2, 3); it never goes Up.
    assert set(landed) == {(3, 2), (2, 1), (2, 3)}
    for count in landed.values():
        assert 400 < count < 600  # 1/3 of 1500 = 500; 4 sigma is about 73


def test_rewards_and_termination_in_hole_and_on_goal():
    env = make_env("frozen_lake", desc=["SH", "FG"], is_slippery=False)
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("<answer>Right</answer>")
    assert (obs, reward, term, trunc) == ("_X\n_G", 0.0, True, False)
    assert info["metrics"]["success"] == 0.0
    env.reset(seed=0)
    assert env.step("<answer>Down</answer>")[1:3] == (0.0, False)
    obs, reward, term, _, info = env.step("<answer>Right</answer>")
    assert (obs, reward, term, info["metrics"]["success"]) == ("_O\n_√", 1.0, True, 1.0)


def test_walking_into_the_edge_is_valid_but_not_effective_and_max_steps_truncates():
    env = make_env("frozen_lake", desc=["SF", "FG"], is_slippery=False, max_steps=2)
    env.reset(seed=0)
    _, _, term, trunc, info = env.step("<answer>Up</answer>")
    assert info["metrics"]["action_is_valid"] == 1.0 and info["metrics"]["action_is_effective"] == 0.0
    assert not term and not trunc
    _, _, term, trunc, _ = env.step("<answer>Left</answer>")
    assert not term and trunc


def test_symbol_table_and_action_names_are_configurable():
    env = make_env(
        "frozen_lake",
        desc=["SF", "HG"],
        is_slippery=False,
        grid_lookup={"0": "@", "1": ".", "2": "~", "3": "$", "4": "!", "5": "*"},
        grid_vocab={"@": "you", "~": "water"},
        action_lookup={1: "West", 2: "South", 3: "East", 4: "North"},
    )
    obs, info = env.reset(seed=0)
    assert obs == "@.\n~$"
    assert "@: you" in info["env_instruction"] and "West, South, East, North" in info["env_instruction"]
    assert env.step("<answer>south</answer>")[0] == "..\n!$"


def test_map_seed_fixes_the_map_for_every_episode():
    env = make_env("frozen_lake", size=6, map_seed=123)
    assert len({env.reset(seed=s)[0] for s in range(20)}) == 1


def test_random_start_draws_every_cell_that_can_reach_the_goal_and_no_other():
    # (0, 3) is frozen but walled in by holes; (1, 3) is a hole; (2, 3) is the goal
    desc = ["SFHF", "FFFH", "HFFG"]
    can_reach = {(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 1), (2, 2)}
    env = make_env("frozen_lake", desc=desc, is_slippery=False, random_start=True, cell_separator=" ")
    starts = {}
    for seed in range(200):
        observation, _ = env.reset(seed=seed)
        starts[seed] = env.player
        assert observation.splitlines()[env.player[0]].split(" ")[env.player[1]] == "P"
    assert set(starts.values()) == can_reach
    assert all(env.reset(seed=seed) and env.player == starts[seed] for seed in (3, 17, 150))  # the seed decides
    env.reset(seed=next(seed for seed, cell in starts.items() if cell == (2, 2)))
    assert env.step("<answer>Right</answer>")[1] == 1.0 and env.is_success()  # one move from the goal
    fixed = make_env("frozen_lake", desc=desc, is_slippery=False)
    assert all(fixed.reset(seed=seed) and fixed.player == (0, 0) for seed in range(20))  # default: S


def test_start_beside_hole_draws_only_cells_where_a_move_toward_the_goal_is_a_hole():
    desc = ["SFHF", "FFFH", "HFFG"]  # as above: Right from (0, 1) and (1, 2), Down from (1, 0) fall in
    env = make_env("frozen_lake", desc=desc, is_slippery=False, random_start=True, start_beside_hole=True)
    assert {env.reset(seed=seed) and env.player for seed in range(100)} == {(0, 1), (1, 0), (1, 2)}
    generated = make_env("frozen_lake", size=4, p=0.8, is_slippery=False, random_start=True,
                         start_beside_hole=True, describe_surroundings=True)
    for seed in range(50):  # maps with no such cell are redrawn: every episode starts at a decision
        observation, _ = generated.reset(seed=seed)
        assert has_goalward_hole(generated.desc, generated.player)
        assert shortest_path_moves(generated.desc, generated.player)
        assert "hole" in observation.splitlines()[-1]
    with pytest.raises(ValueError, match="start_beside_hole"):
        make_env("frozen_lake", desc=["SF", "FG"], random_start=True, start_beside_hole=True).reset(seed=0)
    with pytest.raises(ValueError, match="start_beside_hole.*random_start"):
        make_env("frozen_lake", start_beside_hole=True)


def test_cell_separator_and_surroundings_line_describe_the_board():
    env = make_env("frozen_lake", desc=["SFH", "HFF", "FFG"], is_slippery=False,
                   cell_separator=" ", describe_surroundings=True)
    obs, _ = env.reset(seed=0)
    assert obs == "P _ O\nO _ _\n_ _ G\nLeft: edge, Down: hole, Right: frozen, Up: edge."
    obs = env.step("<answer>Right</answer>")[0]
    assert obs.splitlines()[-1] == "Left: frozen, Down: frozen, Right: hole, Up: edge."
    env.step("<answer>Down</answer>")
    obs = env.step("<answer>Right</answer>")[0]
    assert obs.splitlines()[-1] == "Left: frozen, Down: goal, Right: edge, Up: hole."
    # the state key ignores the presentation: GiGPO groups the same states whatever the format
    plain = make_env("frozen_lake", desc=["SFH", "HFF", "FFG"], is_slippery=False)
    plain.reset(seed=0)
    for move in ("Right", "Down", "Right"):
        plain.step(f"<answer>{move}</answer>")
    assert plain.state_key() == env.state_key()


def test_progress_reward_pays_per_cell_closer_to_the_goal_and_nothing_for_a_hole():
    env = make_env("frozen_lake", desc=["SFH", "FHF", "FFG"], is_slippery=False, progress_reward=0.1)
    env.reset(seed=0)
    assert env.step("<answer>Up</answer>")[1] == 0.0  # into the edge: no move, no progress
    assert env.step("<answer>Down</answer>")[1] == pytest.approx(0.1)
    assert env.step("<answer>Up</answer>")[1] == pytest.approx(-0.1)
    env.step("<answer>Down</answer>")
    _, reward, terminated, _, _ = env.step("<answer>Right</answer>")  # closer, but a hole
    assert (reward, terminated) == (0.0, True)
    env.reset(seed=0)
    rewards = [env.step(f"<answer>{m}</answer>")[1] for m in ("Down", "Down", "Right", "Right")]
    assert rewards == pytest.approx([0.1, 0.1, 0.1, 1.1])
    assert env.is_success()


def test_path_progress_charges_the_way_into_a_dead_end_and_pays_the_way_out():
    # the top row is a dead end: the only way to G is down the left column
    desc = ["SFF", "FHH", "FFG"]
    manhattan = make_env("frozen_lake", desc=desc, is_slippery=False, progress_reward=0.1)
    path = make_env("frozen_lake", desc=desc, is_slippery=False, progress_reward=0.1, progress_measure="path")
    into_and_out = ("Right", "Right", "Left", "Left")
    for env, expected in ((manhattan, [0.1, 0.1, -0.1, -0.1]), (path, [-0.1, -0.1, 0.1, 0.1])):
        env.reset(seed=0)
        assert [env.step(f"<answer>{m}</answer>")[1] for m in into_and_out] == pytest.approx(expected)
    path.reset(seed=0)
    rewards = [path.step(f"<answer>{m}</answer>")[1] for m in ("Down", "Down", "Right", "Right")]
    assert rewards == pytest.approx([0.1, 0.1, 0.1, 1.1])  # the shortest path pays as Manhattan does
    path.reset(seed=0)
    path.step("<answer>Down</answer>")
    assert path.step("<answer>Right</answer>")[1] == 0.0  # a hole earns no progress
    walled_off = make_env("frozen_lake", desc=["SFH", "HHF", "FFG"], is_slippery=False, progress_reward=0.1,
                          progress_measure="path")
    walled_off.reset(seed=0)
    assert walled_off.step("<answer>Right</answer>")[1] == 0.0  # no path to G anywhere: no progress, no error
    with pytest.raises(ValueError, match="progress_measure.*'path'"):
        make_env("frozen_lake", progress_measure="bfs")


def test_ineffective_penalty_costs_a_move_into_the_edge_and_nothing_else():
    env = make_env("frozen_lake", desc=["SFH", "FHF", "FFG"], is_slippery=False, ineffective_penalty=-0.2,
                   format_penalty=-0.05, progress_reward=0.1)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("<answer>Left</answer>")  # into the edge: valid, changes nothing
    assert reward == pytest.approx(-0.2)
    assert info["metrics"]["action_is_valid"] == 1.0 and info["metrics"]["action_is_effective"] == 0.0
    assert env.step("<answer>Down</answer>")[1] == pytest.approx(0.1)  # a real move: shaping only
    assert env.step("no move here")[1] == pytest.approx(-0.05)  # an invalid turn: the format penalty alone
    env.step("<answer>Down</answer>")
    assert env.step("<answer>Down</answer>")[1] == pytest.approx(-0.2)  # the bottom edge
    default = make_env("frozen_lake", desc=["SFH", "FHF", "FFG"], is_slippery=False)
    default.reset(seed=0)
    assert default.step("<answer>Left</answer>")[1] == 0.0  # off by default: ROLL's rewards


def test_hole_penalty_costs_only_the_move_that_falls_in():
    env = make_env("frozen_lake", desc=["SFH", "FHF", "FFG"], is_slippery=False, hole_penalty=-1.0,
                   progress_reward=0.1)
    env.reset(seed=0)
    assert env.step("<answer>Right</answer>")[1] == pytest.approx(0.1)  # safe: shaping only
    _, reward, terminated, _, _ = env.step("<answer>Down</answer>")  # into the hole at the centre
    assert (reward, terminated) == (pytest.approx(-1.0), True)
    assert not env.is_success()
    env.reset(seed=0)
    rewards = [env.step(f"<answer>{m}</answer>")[1] for m in ("Down", "Down", "Right", "Right")]
    assert rewards == pytest.approx([0.1, 0.1, 0.1, 1.1])  # the goal: no penalty anywhere
    default = make_env("frozen_lake", desc=["SFH", "FHF", "FFG"], is_slippery=False)
    default.reset(seed=0)
    default.step("<answer>Right</answer>")
    assert default.step("<answer>Down</answer>")[1] == 0.0  # off by default: ROLL's rewards


@pytest.mark.parametrize("key, value", [("cell_separator", "\n"), ("describe_surroundings", "yes"),
                                        ("progress_reward", "0.1"), ("ineffective_penalty", "-0.1"),
                                        ("hole_penalty", "-1"), ("random_start", "yes"),
                                        ("start_beside_hole", "yes")])
def test_bad_observation_and_reward_options_name_the_key(key, value):
    with pytest.raises(ValueError, match=key):
        make_env("frozen_lake", **{key: value})
