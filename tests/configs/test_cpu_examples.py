"""Every config of the CPU example folder loads and passes validation; the Sokoban one is ROLL's
SimpleSokoban (6x6 room, one box, 10 moves) drawn one token per cell."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from roll.agentic.env import make_env
from roll.launch.loader import load_agentic_config

CPU_DIR = Path(__file__).resolve().parents[2] / "examples" / "smollm2-135M-agentic_cpu"


def val_episodes(config) -> tuple:
    """What decides a validation's tags and env seeds (RolloutScheduler): equal, the same episodes."""
    manager = config.val_env_manager
    return config.seed, config.val_batch_size, manager.num_env_groups, manager.group_size, manager.tags


@pytest.mark.parametrize("name", sorted(p.stem for p in CPU_DIR.glob("*.yaml")))
def test_cpu_example_config_loads(name):
    config = load_agentic_config(CPU_DIR, name, overrides=["pretrain=tiny-random-qwen2"])
    assert config.train_env_manager.tags and set(config.train_env_manager.tags) <= set(config.custom_envs)


def test_sokoban_example_is_simple_sokoban_with_spaced_cells():
    config = load_agentic_config(CPU_DIR, "agent_val_sokoban", overrides=["pretrain=tiny-random-qwen2"])
    assert config.train_env_manager.tags == ["SokobanCPU"] == config.val_env_manager.tags
    spec = config.custom_envs["SokobanCPU"]
    env = make_env(spec.env_type, **spec.env_config)
    rows = env.reset(seed=0)[0].split("\n")
    assert len(rows) == 6 and all(len(row.split(" ")) == 6 for row in rows)
    assert sum(row.split(" ").count("X") for row in rows) == 1  # one box, off its target at the start
    assert env.optimal_moves <= spec.max_steps == 10


def first_move_rewards(spec) -> dict[str, set[float]]:
    """What the real env pays for each first move (and a reply with no move) in 20 rooms, by kind:
    "no move", "into a wall" (valid, nothing moved) or "effective"."""
    rewards: dict[str, set[float]] = {}
    for seed in range(20):
        for move in ("Up", "Down", "Left", "Right", "Jump"):
            env = make_env(spec.env_type, **spec.env_config)
            env.reset(seed=seed)
            _, reward, _, _, info = env.step(f"<answer>{move}</answer>")
            kind = "no move" if not info["metrics"]["action_is_valid"] else (
                "into a wall" if not info["metrics"]["action_is_effective"] else "effective")
            rewards.setdefault(kind, set()).add(reward)
    return rewards


def test_sokoban_example_rewards_a_reply_with_no_move_below_any_move():
    """A reply with no move must cost more than any move, a move into a wall included: otherwise RL
    learns to write nonsense instead of moving (it did, with a wall move at -0.2 and no move at -0.15)."""
    config = load_agentic_config(CPU_DIR, "agent_val_sokoban", overrides=["pretrain=tiny-random-qwen2"])
    rewards = first_move_rewards(config.custom_envs["SokobanCPU"])
    assert set(rewards) == {"no move", "into a wall", "effective"}, rewards
    assert max(rewards["no move"]) < min(rewards["into a wall"] | rewards["effective"]), rewards


def test_a_wall_priced_below_a_broken_reply_is_warned_with_the_envs_own_numbers(caplog):
    """sk43 set ineffective_penalty -0.3 on the easy rooms: a move into a wall then earned -0.4 and a
    reply with no move -0.15, and the replies broke. Loading such a config says so, with the wall's
    reward as the env pays it; the shipped config and a lowered format_penalty load without it."""
    tag = "SokobanEasyCPU"
    overrides = ["pretrain=tiny-random-qwen2", f"custom_envs.{tag}.env_config.ineffective_penalty=-0.3"]
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        config = load_agentic_config(CPU_DIR, "agent_val_sokoban_easy", overrides=overrides)
    warned = [r.getMessage() for r in caplog.records if "break its reply's format" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"custom_envs.{tag}.env_config"), warned
    walls = first_move_rewards(config.custom_envs[tag])["into a wall"]
    assert len(walls) == 1, walls  # every wall in 20 rooms costs the same
    (wall,) = walls
    assert wall == pytest.approx(-0.4)
    assert float(re.search(r"earns (-?[\d.]+)", warned[0]).group(1)) == pytest.approx(wall)
    assert "format_penalty -0.15" in warned[0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        load_agentic_config(CPU_DIR, "agent_val_sokoban_easy", overrides=["pretrain=tiny-random-qwen2"])
        load_agentic_config(CPU_DIR, "agent_val_sokoban_easy",
                            overrides=[*overrides, "custom_envs.SokobanCPU.env_config.format_penalty=-0.5"])
    assert not [r for r in caplog.records if "break its reply's format" in r.getMessage()]


def test_holes_example_trains_on_holier_maps_and_validates_on_the_base_configs_maps():
    """Its validation must be the base config's (same maps, same baselines) for the two to compare."""
    base = load_agentic_config(CPU_DIR, "agent_val_frozen_lake", overrides=["pretrain=tiny-random-qwen2"])
    holes = load_agentic_config(CPU_DIR, "agent_val_frozen_lake_holes", overrides=["pretrain=tiny-random-qwen2"])

    assert val_episodes(holes) == val_episodes(base)
    val_tag, train_tag = holes.val_env_manager.tags[0], holes.train_env_manager.tags[0]
    # the training env is a copy of the validation env's block in the YAML: only p may differ
    train_spec, val_spec = holes.custom_envs[train_tag], holes.custom_envs[val_tag]
    assert {k: v for k, v in train_spec.env_config.items() if k != "p"} == val_spec.env_config
    assert (train_spec.env_type, train_spec.max_steps, train_spec.max_tokens_per_step, train_spec.env_instruction,
            train_spec.agent_system_template, train_spec.agent_template) == (
        val_spec.env_type, val_spec.max_steps, val_spec.max_tokens_per_step, val_spec.env_instruction,
        val_spec.agent_system_template, val_spec.agent_template)
    base_val = make_env("frozen_lake", **base.custom_envs[val_tag].env_config)
    holes_val = make_env("frozen_lake", **holes.custom_envs[val_tag].env_config)
    train = make_env("frozen_lake", **holes.custom_envs[train_tag].env_config)
    assert all(base_val.reset(seed=s)[0] == holes_val.reset(seed=s)[0] for s in range(50))

    def mean_holes(env):  # the rows of the map, not the surroundings line under them
        return sum(row.split(" ").count("O") for s in range(300) for row in env.reset(seed=s)[0].split("\n")[:-1]) / 300

    assert mean_holes(train) > 1.5 * mean_holes(holes_val)


def test_holes_example_takes_the_answer_alone():
    holes = load_agentic_config(CPU_DIR, "agent_val_frozen_lake_holes", overrides=["pretrain=tiny-random-qwen2"])
    for tag in holes.custom_envs:
        env = make_env("frozen_lake", **holes.custom_envs[tag].env_config)
        valid = {}
        for reply in ("<answer>Down</answer>", " <answer> down </answer>", "<answer>Down</answer> Right",
                      "Down", "<answer>Down: Right</answer>"):
            env.reset(seed=0)
            valid[reply] = env.step(reply)[4]["metrics"]["action_is_valid"]
        assert valid == {"<answer>Down</answer>": 1.0, " <answer> down </answer>": 1.0,
                         "<answer>Down</answer> Right": 0.0, "Down": 0.0, "<answer>Down: Right</answer>": 0.0}, tag
    assert holes.actor_infer.generating_args.stop_strings == ["</answer>"]


def test_map_blind_script_finds_the_maps_the_runs_play():
    """benchmarks/map_blind_baselines.py must measure the maps a run plays: the seeds below are the
    env seeds a run of these configs recorded in its trajectories (step 6's first group: 42600144)."""
    from benchmarks.map_blind_baselines import episode_maps

    holes = load_agentic_config(CPU_DIR, "agent_val_frozen_lake_holes", overrides=["pretrain=tiny-random-qwen2"])
    train = episode_maps(holes, train_steps=6)
    assert list(train) == ["FrozenLakeHolesCPU"] and len(train["FrozenLakeHolesCPU"]) == 6 * 4
    assert train["FrozenLakeHolesCPU"][20] == 42600144  # step 6, task 0
    assert episode_maps(holes) == {"FrozenLakeCPU": [(42 * 1_000_003 + 7_777_777 + k) % 2**31 for k in range(64)]}


def test_sokoban_line_reader_walks_behind_the_box_and_pushes():
    """benchmarks/map_blind_baselines.py's Sokoban reader, on hand-written surroundings lines."""
    import random

    from benchmarks.map_blind_baselines import push_box_towards_target

    def move(around, box_line):
        return push_box_towards_target(f"# # #\n{around}\n{box_line}", random.Random(0))

    open_all = "Up: floor, Down: floor, Left: floor, Right: box (can push)."
    assert move(open_all, "Box: 1 right from you; its target: 2 right from the box.") == "Right"
    # the target is below the box: the push comes from above it, one row up from the player
    assert move(open_all, "Box: 1 right from you; its target: 1 down from the box.") == "Up"
    # behind the box is 2 down and 1 left of the player; Down is a wall, so it steps Left first
    walled = "Up: floor, Down: wall, Left: floor, Right: floor."
    assert move(walled, "Box: 2 down from you; its target: 1 right from the box.") == "Left"
    # both moves towards that cell are walls: any open move, never into a wall
    boxed_in = "Up: floor, Down: wall, Left: wall, Right: floor."
    assert {push_box_towards_target(f"#\n{boxed_in}\nBox: 2 down from you; its target: 1 right from the box.",
                                    random.Random(seed)) for seed in range(20)} == {"Up", "Right"}


def test_agent_moves_reads_an_episode_against_its_surroundings_lines():
    """benchmarks/agent_moves.py on boards from the real env: into the dead end at (0,2) (Right is a
    hole, Down is a hole), a reply with no move, back out twice, then down and across to the goal."""
    from benchmarks.agent_moves import move_report

    env = make_env("frozen_lake", desc=["SFFH", "FHHF", "FFFF", "HFFG"], is_slippery=False, max_steps=20,
                   describe_surroundings=True)
    board, _ = env.reset(seed=0)
    turns = []
    for move in ["Right", "Right", None, "Left", "Left", "Down", "Down", "Right", "Right", "Down", "Right"]:
        turns.append({"board": board, "action": move, "valid": move is not None})
        board = env.step(f"<answer>{move}</answer>" if move else "no move")[0]
    assert env.is_success()
    report = move_report([{"step_index": 0, "env_metrics": {"success": 1.0}, "turns": turns}])
    assert report["moves"] == {"Right": 5, "Left": 2, "Down": 3, "invalid": 1}
    assert report["valid moves read"] == 10
    # the rule (Right if safe, else Down if safe) agrees at (0,0), (0,1), (1,0), (2,0), (2,1), (3,2)
    assert report["share the Right-first rule makes"] == pytest.approx(0.6)
    assert report["share into a hole or the edge"] == 0.0
    assert report["Right and Down both safe"] == {"Right": 2, "Down": 2}  # (0,0) twice, (2,1), (2,2)
    assert report["dead ends (neither safe)"] == {"backs out": 1}  # the Left at (0,2)


@pytest.mark.parametrize("name", ["agent_val_sokoban", "agent_val_sokoban_memoryless"])
def test_sokoban_instruction_names_every_symbol_the_board_shows(name):
    config = load_agentic_config(CPU_DIR, name, overrides=["pretrain=tiny-random-qwen2"])
    spec = config.custom_envs["SokobanCPU"]
    symbols = set(make_env(spec.env_type, **spec.env_config).config.grid_lookup.values())
    assert symbols >= {"P", "S", "X", "√", "O", "#", "_"}
    assert [s for s in sorted(symbols) if s not in spec.env_instruction] == []


def test_memoryless_example_prompts_with_the_board_alone():
    """Training and validation play one turn per prompt: no earlier turns, no move count, so a policy
    that ignores the board can only be one move distribution."""
    config = load_agentic_config(CPU_DIR, "agent_val_frozen_lake_memoryless", overrides=["pretrain=tiny-random-qwen2"])
    tags = {*config.train_env_manager.tags, *config.val_env_manager.tags}
    assert tags == {"FrozenLakeHolesCPU", "FrozenLakeCPU"}
    for tag in tags:
        spec = config.custom_envs[tag]
        assert spec.env_manager_cls.endswith("StepEnvManager") and spec.history_length == 0, tag
        assert spec.agent_template == "Map:\n{observation}\nYour move?", tag
    assert config.adv_estimator == "gigpo"
    holes = load_agentic_config(CPU_DIR, "agent_val_frozen_lake_holes", overrides=["pretrain=tiny-random-qwen2"])
    for tag in tags:  # the same envs as the holes example: only the prompt and the estimator differ
        assert config.custom_envs[tag].env_config == holes.custom_envs[tag].env_config, tag


def test_sokoban_memoryless_example_plays_the_same_rooms_with_the_room_described():
    config = load_agentic_config(CPU_DIR, "agent_val_sokoban_memoryless", overrides=["pretrain=tiny-random-qwen2"])
    spec = config.custom_envs["SokobanCPU"]
    assert spec.env_manager_cls.endswith("StepEnvManager") and spec.history_length == 0
    assert spec.agent_template == "Map:\n{observation}\nYour move?" and config.adv_estimator == "gigpo"
    base = load_agentic_config(CPU_DIR, "agent_val_sokoban", overrides=["pretrain=tiny-random-qwen2"])
    changed = {k for k in spec.env_config if spec.env_config[k] != base.custom_envs["SokobanCPU"].env_config.get(k)}
    assert changed == {"action_pattern", "describe_surroundings"}  # same rooms, rewards and step budget
    obs, _ = make_env(spec.env_type, **spec.env_config).reset(seed=42)
    lines = obs.split("\n")
    assert len(lines) == 8 and lines[6].startswith("Up: ") and lines[7].startswith("Box: ")


def test_sokoban_easy_example_trains_one_push_from_solved_and_validates_on_the_memoryless_rooms():
    """The curriculum config: its validation must be the memoryless config's (same rooms, same baselines)
    for the two to compare; its first stage's training rooms are the same game, one push from solved."""
    base = load_agentic_config(CPU_DIR, "agent_val_sokoban_memoryless", overrides=["pretrain=tiny-random-qwen2"])
    easy = load_agentic_config(CPU_DIR, "agent_val_sokoban_easy", overrides=["pretrain=tiny-random-qwen2"])

    assert val_episodes(easy) == val_episodes(base)
    val_spec, train_spec = easy.custom_envs["SokobanCPU"], easy.custom_envs[easy.train_env_manager.tags[0]]
    assert val_spec.env_config == base.custom_envs["SokobanCPU"].env_config
    changed = {k for k in train_spec.env_config if train_spec.env_config[k] != val_spec.env_config.get(k)}
    assert changed == {"search_depth", "max_steps", "progress_reward", "progress_measure"}, changed
    assert (train_spec.agent_template, train_spec.env_instruction, train_spec.history_length) == (
        val_spec.agent_template, val_spec.env_instruction, val_spec.history_length)
    train_env, val_env = make_env("sokoban", **train_spec.env_config), make_env("sokoban", **val_spec.env_config)

    def moves_needed(env):
        return [env.reset(seed=s) and env.optimal_moves for s in range(1000, 1064)]

    assert set(moves_needed(train_env)) == {1} and max(moves_needed(val_env)) > 3
    assert train_spec.max_steps == train_spec.env_config["max_steps"] == 1 < val_spec.max_steps
    # one push from solved: exactly one of the four moves solves each room, and its line names the box
    for seed in range(1000, 1020):
        solving = [move for move in ("Up", "Down", "Left", "Right")
                   if train_env.reset(seed=seed) and train_env.step(f"<answer>{move}</answer>") and train_env.is_success()]
        observation, _ = train_env.reset(seed=seed)
        assert len(solving) == 1 and f"{solving[0]}: box (can push)" in observation, (seed, solving, observation)


def test_sokoban_moves_measures_each_move_against_the_solver():
    """benchmarks/sokoban_moves.py on a room from the real env (seed 3), played twice: a push into a wall,
    a step toward the box and back, then the env solver's own solution; and the walk to below the box,
    a push into the corner above it (the room is lost), then one more move."""
    from benchmarks.sokoban_moves import move_report
    from roll.agentic.env.sokoban.room import solve

    env = make_env("sokoban", dim_room=(6, 6), num_boxes=1, max_steps=40, describe_surroundings=True,
                   cell_separator=" ")

    def play(moves: list, env=env) -> dict:
        board, _ = env.reset(seed=3)
        turns = []
        for move in moves:
            turns.append({"board": board, "action": move, "valid": move is not None})
            board = env.step(f"<answer>{move}</answer>" if move else "no move")[0]
        return {"step_index": 0, "env_metrics": {"success": float(env.is_success())}, "turns": turns}

    board, _ = env.reset(seed=3)
    assert board.splitlines()[:4] == ["# # # # # #", "# _ _ # P #", "# _ X # _ #", "# _ O _ _ #"]
    solution = [("Up", "Down", "Left", "Right")[d] for d in solve(env.fixed, env.cols, env.player, env.boxes)]
    assert solution == ["Down", "Down", "Left", "Left", "Left", "Up", "Up", "Right", "Down"]
    solved = play(["Up", None, "Down", "Up", *solution])
    lost = play(["Down", "Down", "Left", "Left", "Up", "Left"])  # Up pushes the box into the top-left corner
    assert solved["env_metrics"]["success"] == 1.0 and lost["env_metrics"]["success"] == 0.0
    report = move_report([solved, lost])
    assert report["moves"] == {"Up": 5, "Down": 6, "Left": 6, "Right": 1, "invalid": 1}
    # solvable-room moves: 12 in the first episode (the wall, Down, the Up back, 9 of the solution), 5 in the second
    assert report["valid moves in a solvable room"] == 17
    assert report["share along a shortest solution"].startswith(f"{14 / 17:.3f} ")  # 1 + 9, then 4
    assert report["share into a wall"].startswith(f"{1 / 17:.3f} ")
    assert report["share a detour"].startswith(f"{1 / 17:.3f} ")
    assert report["share loses the room"].startswith(f"{1 / 17:.3f} ")
    assert report["valid moves after the room was lost"] == 1
    assert report["first move along a shortest solution"] == "0.500 of 2"  # Up into the wall; Down along
    assert report["success by moves needed"] == {9: "1/2"}  # both start in seed 3's room, 9 moves from solved
    assert report["same move again after one that changed nothing"] == "0 of 0"  # the Up into the wall is followed by no move
    # Up into the wall twice, then Right, into the wall too: one repeat of two answers to an unchanged room,
    # read through describe_last_move's line (the boards differ in it, the rooms do not)
    stuck = play(["Up", "Up", "Right"], env=make_env("sokoban", dim_room=(6, 6), num_boxes=1, max_steps=40,
                                                     describe_surroundings=True, cell_separator=" ", describe_last_move=True))
    assert stuck["turns"][0]["board"] != stuck["turns"][1]["board"]
    stuck_report = move_report([stuck])
    assert stuck_report["same move again after one that changed nothing"] == "1 of 2"
    assert stuck_report["share into a wall"].startswith("1.000 ")
    assert stuck_report["success by moves needed"] == {9: "0/1"}


def test_sokoban_moves_leaves_random_turns_out_of_the_policys_moves():
    """Turns a run's random_action_rate played (`random_turns`) move the room but are not the policy's:
    seed 3's room, the policy pushes into the wall (Up), a random Down follows, then the policy's Up
    again is a step back toward where it started, not a repeat of an unchanged room."""
    from benchmarks.sokoban_moves import move_report

    env = make_env("sokoban", dim_room=(6, 6), num_boxes=1, max_steps=40, describe_surroundings=True, cell_separator=" ")
    board, _ = env.reset(seed=3)
    turns = []
    for move in ["Up", "Up", "Down", "Up"]:
        turns.append({"board": board, "action": move, "valid": True})
        board = env.step(f"<answer>{move}</answer>")[0]
    episode = {"step_index": 0, "env_metrics": {"success": 0.0}, "turns": turns}
    everything = move_report([episode])
    assert everything["moves"] == {"Up": 3, "Down": 1}
    assert everything["same move again after one that changed nothing"] == "1 of 2"  # Up after Up, Down after Up
    # turns 1 and 2 (0-based) random: the policy made the first Up and the last one
    report = move_report([{**episode, "random_turns": [1, 2]}])
    assert report["moves"] == {"Up": 2}
    assert report["valid moves in a solvable room"] == 2
    assert report["share into a wall"].startswith("0.500 ")  # the first Up; the last is the step back up
    assert report["same move again after one that changed nothing"] == "0 of 0"
