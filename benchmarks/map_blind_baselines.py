"""The map-blind baselines of a config's validation maps, without running anything else.

Reads the config, derives the validation episodes' tags and env seeds as RolloutScheduler does
(seeds depend only on the run's seed and the episode's index), and prints per env tag what the best
fixed move sequence, the best biased random policy and uniform random moves reach on those maps
(roll/agentic/env/map_blind.py). A run's validation logs the same numbers (val/blind/*).
For FrozenLake it adds policies that do look, but only at the `describe_surroundings` line: Right or
Down at random unless that move is a hole or the edge, else any move that is not — what an agent
reading that line (and nothing else) can reach — and two that never back out of a dead end (Left or
Up), among them the rule the one-board run's agent settled on. For Sokoban with the surroundings
lines, one that reads only those lines: walk behind the box and push it towards its target; and one
that follows describe_push's line (walk to the cell it names, then push the way it names).

    python benchmarks/map_blind_baselines.py --config-path examples/smollm2-135M-agentic_cpu \\
        --config-name agent_val_frozen_lake [overrides...]

With --train-steps N it does the same on the maps of the first N training steps instead (the
training tags' envs and seeds): how much a map-blind policy earns where the agent learns.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def episode_maps(config, train_steps: int = 0) -> dict[str, list[int]]:
    """tag -> the env seeds of one validation (or, with train_steps, of training steps 1..train_steps),
    in episode order, one seed per GRPO group, numbered as RolloutScheduler.get_batch numbers them."""
    from roll.pipeline.agentic.rollout_scheduler import SeedNumbering, round_robin_by_tag, split_groups

    manager = config.train_env_manager if train_steps else config.val_env_manager
    group_tags = split_groups(manager.num_env_groups, list(manager.tags), manager.num_groups_partition)
    order = round_robin_by_tag(group_tags)
    batch = config.rollout_batch_size if train_steps else config.val_batch_size
    episodes = (batch or manager.env_count) // manager.group_size
    maps: dict[str, list[int]] = {}
    for step in range(1, train_steps + 1) if train_steps else [0]:
        numbering = SeedNumbering(group_tags, manager.seeds_per_tag, config.seed, "train" if train_steps else "val", step)
        for task in range(episodes):
            group = order[task % len(group_tags)]
            maps.setdefault(group_tags[group], []).append(numbering.seed_of(task, group))
    return maps


def safe_right_down_at_random(around: dict[str, str], rng: random.Random) -> str:
    """Right or Down at random unless that move is a hole or the edge, else any move that is not."""
    safe = [move for move, tile in around.items() if tile not in ("hole", "edge")]
    preferred = [move for move in safe if move in ("Right", "Down")]
    return rng.choice(preferred or safe or list(around))


def right_then_down_no_backing(around: dict[str, str], rng: random.Random) -> str:
    """Right if it is safe, else Down if that is, else Right into the edge: it never backs out of a
    dead end (the rule the one-board run's step-21 agent plays, examples/smollm2-135M-agentic_cpu)."""
    return next((move for move in ("Right", "Down") if around[move] not in ("hole", "edge")), "Right")


def right_down_at_random_no_backing(around: dict[str, str], rng: random.Random) -> str:
    """Right or Down at random among the safe ones, else Right into the edge."""
    safe = [move for move in ("Right", "Down") if around[move] not in ("hole", "edge")]
    return rng.choice(safe) if safe else "Right"


SURROUNDINGS_READERS = {
    "Right/Down at random when safe, else any safe move": safe_right_down_at_random,
    "Right/Down at random when safe, never backs out": right_down_at_random_no_backing,
    "Right if safe, else Down if safe, never backs out": right_then_down_no_backing,
}


OFFSET_WORDS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}  # Sokoban's box line
MOVE_NAMES = {step: word.capitalize() for word, step in OFFSET_WORDS.items()}


def sokoban_offset(text: str) -> tuple[int, int]:
    """(rows, columns) of an offset such as "1 down and 2 left" (the box line's words)."""
    rows = cols = 0
    for count, word in re.findall(r"(\d+) (up|down|left|right)", text):
        rows += int(count) * OFFSET_WORDS[word][0]
        cols += int(count) * OFFSET_WORDS[word][1]
    return rows, cols


def push_box_towards_target(observation: str, rng: random.Random) -> str:
    """Sokoban, one box, from the surroundings lines alone: push the box along the row or column of
    its target (the vertical offset first) by walking to the cell behind it, stepping towards that
    cell on an axis whose move reaches floor or target, else any such move."""
    lines = observation.splitlines()
    around = surroundings(next(line for line in lines if line.startswith("Up: ")))
    box_line = next((line for line in lines if line.startswith("Box: ")), None)
    if box_line is None:  # every box is on a target already
        return rng.choice(list(around))
    from_you, from_box = box_line.removeprefix("Box: ").split("; its target: ")
    box, target = sokoban_offset(from_you), sokoban_offset(from_box)
    push = (1 if target[0] > 0 else -1, 0) if target[0] else (0, 1 if target[1] > 0 else -1)
    behind = (box[0] - push[0], box[1] - push[1])
    if behind == (0, 0):
        return MOVE_NAMES[push]
    return step_towards(behind, around, rng)


def step_towards(offset: tuple[int, int], around: dict[str, str], rng: random.Random) -> str:
    """A move towards the cell at `offset` on an axis whose move reaches floor or target, else any such
    move (else any move)."""
    open_moves = [move for move, what in around.items() if what in ("floor", "target")]
    towards = [(1 if offset[0] > 0 else -1, 0)] if offset[0] else []
    towards += [(0, 1 if offset[1] > 0 else -1)] if offset[1] else []
    rng.shuffle(towards)
    return next((MOVE_NAMES[step] for step in towards if MOVE_NAMES[step] in open_moves), None) \
        or rng.choice(open_moves or list(around))


def follow_push_line(observation: str, rng: random.Random) -> str:
    """Sokoban with describe_push: the push it names when the player stands there, else a step towards
    the cell it names (as push_box_towards_target walks)."""
    lines = observation.splitlines()
    around = surroundings(next(line for line in lines if line.startswith("Up: ")))
    push_line = next((line for line in lines if line.startswith("Push it ")), None)
    if push_line is None:  # every box is on a target already
        return rng.choice(list(around))
    push, where = push_line.removeprefix("Push it ").rstrip(".").split(": ")
    return push if where == "you stand there" else step_towards(sokoban_offset(where), around, rng)


def surroundings(line: str) -> dict[str, str]:
    """A surroundings line ("Left: edge, Down: hole, ...") as move -> what that move reaches."""
    return dict(part.split(": ") for part in line.rstrip(".").split(", "))


def reading_last_line(choose):
    """A FrozenLake reader: ``choose`` gets the surroundings line, the observation's last line."""
    return lambda observation, rng: choose(surroundings(observation.splitlines()[-1]), rng)


def reader_success(spec, seeds: list[int], horizon: int, choose, samplings: int = 20, **lines: bool) -> float:
    """Success of a policy that reads the observation with describe_surroundings (and any other line
    keys in `lines`) on: `choose(observation, rng)` picks the move."""
    from roll.agentic.env.registry import make_env

    env = make_env(spec.env_type, **{**spec.env_config, "describe_surroundings": True, **lines})
    solved = 0
    for seed in seeds:
        for sampling in range(samplings):
            rng = random.Random(sampling)
            observation, _ = env.reset(seed=seed)
            for _ in range(horizon):
                observation, _, terminated, truncated, _ = env.step(env.format_answer(choose(observation, rng)))
                if terminated or truncated:
                    break
            solved += env.is_success()
    return solved / (len(seeds) * samplings)


def main(argv: list[str]) -> int:
    from roll.agentic.env.map_blind import check_supported, map_blind_baselines
    from roll.agentic.env.registry import make_env
    from roll.launch.loader import load_agentic_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-path", required=True)
    parser.add_argument("--config-name", required=True)
    parser.add_argument("--train-steps", type=int, default=0,
                        help="measure on the maps of training steps 1..N instead of the validation maps")
    args, overrides = parser.parse_known_args(argv)
    config = load_agentic_config(args.config_path, args.config_name, overrides)
    kind = f"training maps of steps 1-{args.train_steps}" if args.train_steps else "validation maps"
    for tag, seeds in episode_maps(config, args.train_steps).items():
        spec = config.custom_envs[tag]
        env = make_env(spec.env_type, **spec.env_config)
        try:
            check_supported(env)
        except ValueError as exc:
            print(f"{tag}: no map-blind baselines ({exc})")
            continue
        horizon = min(spec.max_steps, env.config.max_steps)
        start = time.perf_counter()
        result = map_blind_baselines(env, seeds, horizon)
        bias = ", ".join(f"{name} {p:.2f}" for name, p in zip(result.action_names, result.best_bias) if p)
        print(f"{tag} ({spec.env_type}, {len(seeds)} {kind}, {horizon} moves; computed in "
              f"{time.perf_counter() - start:.1f} s)")
        print(f"  best fixed sequence   {result.fixed_sequence_success:.3f}  {', '.join(result.best_sequence)}"
              f"{'' if result.sequence_search_complete else '  (search budget hit: best found)'}")
        print(f"  best biased random    {result.biased_random_success:.3f}  {bias}")
        print(f"  uniform random moves  {result.uniform_random_success:.3f}")
        if spec.env_type == "frozen_lake":
            print("  policies that read only the surroundings line (not map-blind):")
            for name, choose in SURROUNDINGS_READERS.items():
                print(f"    {reader_success(spec, seeds, horizon, reading_last_line(choose)):.3f}  {name}")
        elif spec.env_type == "sokoban" and spec.env_config.get("num_boxes", 1) == 1:
            print("  a policy that reads only the surroundings lines (not map-blind):")
            print(f"    {reader_success(spec, seeds, horizon, push_box_towards_target):.3f}  "
                  "walks behind the box and pushes it towards its target")
            print(f"    {reader_success(spec, seeds, horizon, follow_push_line, describe_push=True):.3f}  "
                  "walks to where describe_push's line says to stand, then pushes the way it names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
