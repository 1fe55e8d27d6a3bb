"""Map-blind baselines: exact numbers on hand-built maps, and the CPU example's known 45.3%."""

from __future__ import annotations

import numpy as np
import pytest

from roll.agentic.env.map_blind import (
    LosingMoves,
    best_fixed_sequence,
    bias_grid,
    explore_map,
    map_blind_baselines,
    random_policy_success,
    replayed_actions,
    solved_beyond_sequence,
    solved_by_one_sequence,
)
from roll.agentic.env.registry import make_env

# The 64 validation seeds of examples/smollm2-135M-agentic_cpu (seed 42, RolloutScheduler's validation seeds)
CPU_EXAMPLE_VAL_SEEDS = [(42 * 1_000_003 + 7_777_777 + task) % 2**31 for task in range(64)]

UNIFORM = np.full((1, 4), 0.25)


def lake(*rows: str):
    return make_env("frozen_lake", desc=list(rows), is_slippery=False, max_steps=10)


def test_one_step_map_exact_rates():
    env = lake("SG")  # Right wins; Left, Down and Up bump into the edge
    graph = explore_map(env, seed=0, horizon=10)
    assert random_policy_success([graph], 1, UNIFORM)[0] == pytest.approx(0.25)
    assert random_policy_success([graph], 2, UNIFORM)[0] == pytest.approx(1 - 0.75**2)
    result = map_blind_baselines(env, [0, 1], horizon=2)
    assert result.best_sequence == ("Right",)
    assert result.fixed_sequence_success == 1.0
    assert result.best_bias == (0.0, 0.0, 1.0, 0.0)  # order Left, Down, Right, Up
    assert result.biased_random_success == pytest.approx(1.0)


def test_hole_next_to_start():
    # Right falls in; Down then Right is the only two-move win: 1/16 for uniform moves
    graph = explore_map(lake("SH", "FG"), seed=0, horizon=10)
    assert random_policy_success([graph], 2, UNIFORM)[0] == pytest.approx(1 / 16)
    assert random_policy_success([graph], 1, UNIFORM)[0] == 0.0


def test_no_fixed_sequence_solves_two_mirrored_maps():
    # Map A is only solved by going down first, map B only by going right first: one sequence
    # cannot do both, while a policy that reads the map solves both.
    down_first = explore_map(lake("SHFF", "FHFF", "FHFF", "FFFG"), seed=0, horizon=10)
    right_first = explore_map(lake("SFFF", "HHHF", "FFFF", "FFFG"), seed=0, horizon=10)
    sequence, solves, complete = best_fixed_sequence([down_first, right_first], horizon=10)
    assert complete and sorted(solves) == [False, True]
    assert solved_beyond_sequence([1.0, 1.0], solves) == 0.5
    # an agent that solved both read the board; one that solved one map needs no reading
    assert solved_by_one_sequence([1.0, 1.0], [down_first, right_first], horizon=10) == 0.5
    assert solved_by_one_sequence([0.0, 0.5], [down_first, right_first], horizon=10) == 1.0
    assert solved_by_one_sequence([0.0, 0.0], [down_first, right_first], horizon=10) == 0.0
    # with both maps the same, some sequence solves both
    _, solves, _ = best_fixed_sequence([down_first, down_first], horizon=10)
    assert solves == (True, True)


def test_exploration_stops_at_the_horizon():
    # an open 4x4 map has 16 cells; within 2 moves of the corner only 6 are reachable
    assert len(explore_map(lake("SFFF", "FFFF", "FFFF", "FFFG"), seed=0, horizon=2).solved) == 6
    assert len(explore_map(lake("SFFF", "FFFF", "FFFF", "FFFG"), seed=0, horizon=10).solved) == 16


def test_horizon_shorter_than_the_path_solves_nothing():
    graph = explore_map(lake("SFFF", "FFFF", "FFFF", "FFFG"), seed=0, horizon=10)
    assert best_fixed_sequence([graph], horizon=5)[1] == (False,)
    assert best_fixed_sequence([graph], horizon=6)[1] == (True,)


def test_sokoban_room_needs_its_optimal_number_of_moves():
    env = make_env("sokoban", dim_room=[6, 6], num_boxes=1, max_steps=10)
    env.reset(seed=3)
    optimal = env.optimal_moves  # the generator's own reverse-search length
    graph = explore_map(env, seed=3, horizon=10)
    assert graph.moves_to_solve[0] == optimal
    assert best_fixed_sequence([graph], horizon=optimal)[1] == (True,)
    assert best_fixed_sequence([graph], horizon=optimal - 1)[1] == (False,)


def test_another_sequence_than_the_best_explains_an_agent_that_solves_only_its_maps():
    """An agent replaying Down, Right, Down, Right, Down, Right on the CPU example's 64 validation maps
    solves maps the best sequence (Right x3, Down x3) fails on, yet reads nothing: one sequence explains
    all of them. The agent's successes here are the replayed sequence's, played in the real env."""
    env = make_env("frozen_lake", size=4, is_slippery=False, max_steps=10)
    result = map_blind_baselines(env, CPU_EXAMPLE_VAL_SEEDS, horizon=10)
    replayed = []
    for seed in CPU_EXAMPLE_VAL_SEEDS:
        env.reset(seed=seed)
        for move in ("Down", "Right") * 3:
            if env.step(env.format_answer(move))[2]:
                break
        replayed.append(float(env.is_success()))
    assert sum(replayed) == 22
    assert solved_beyond_sequence(replayed, result.sequence_solves) > 0.2
    assert solved_by_one_sequence(replayed, result.graphs, horizon=10) == 1.0
    # a map-reading agent (the shortest path on every map) solves all 64: no one sequence does
    assert solved_by_one_sequence([1.0] * 64, result.graphs, horizon=10) == result.fixed_sequence_success


def test_cpu_example_validation_maps():
    # Right x3, Down x3 solves 29 of the 64 (45.3%, measured in issue 16).
    env = make_env("frozen_lake", size=4, is_slippery=False, max_steps=10)
    result = map_blind_baselines(env, CPU_EXAMPLE_VAL_SEEDS, horizon=10)
    assert result.best_sequence == ("Right", "Right", "Right", "Down", "Down", "Down")
    assert sum(result.sequence_solves) == 29
    assert result.sequence_search_complete
    assert result.uniform_random_success < result.biased_random_success < result.fixed_sequence_success


def test_bias_grid_rows_are_distributions():
    grid = bias_grid(4, 4)
    assert len(grid) == 35  # compositions of 4 into 4 parts
    assert np.allclose(grid.sum(axis=1), 1.0)


def test_unsupported_envs_are_named():
    with pytest.raises(ValueError, match="is_slippery"):
        explore_map(make_env("frozen_lake", is_slippery=True), seed=0, horizon=10)
    with pytest.raises(ValueError, match="deterministic grid env"):
        explore_map(make_env("countdown"), seed=0, horizon=10)
    with pytest.raises(ValueError, match="2 agent results for 3 maps"):
        solved_beyond_sequence([1.0, 0.0], [True, False, False])
    graph = explore_map(lake("SG"), seed=0, horizon=2)
    with pytest.raises(ValueError, match="1 agent results for 2 maps"):
        solved_by_one_sequence([1.0], [graph, graph], horizon=2)


LEFT, DOWN, RIGHT, UP = range(4)  # FrozenLake's action order


def test_losing_moves_next_to_a_hole():
    graph = explore_map(lake("SH", "FG"), seed=0, horizon=10)
    safe, fell = LosingMoves(4), LosingMoves(4)
    safe.add_episode(graph, [None, DOWN, RIGHT], horizon=10)  # a reply with no move first, then around
    fell.add_episode(graph, [RIGHT], horizon=10)
    assert (safe.decisions, safe.losing_taken, fell.decisions, fell.losing_taken) == (1, 0, 1, 1)
    assert list(safe.losing_by_action) == [0, 0, 1, 0]  # at the start only Right loses
    assert safe.agent_share == 0.0 and safe.move_mix_share == 0.5  # half its moves were Right
    assert fell.agent_share == 1.0 == fell.move_mix_share


def test_a_detour_loses_when_too_few_moves_are_left():
    graph = explore_map(lake("SF", "FG"), seed=0, horizon=2)
    tally = LosingMoves(4)
    tally.add_episode(graph, [LEFT, DOWN], horizon=2)  # into the edge: the goal is then 2 moves away, 1 left
    assert (tally.decisions, tally.losing_taken) == (1, 1)
    roomy = LosingMoves(4)
    roomy.add_episode(graph, [LEFT, DOWN], horizon=4)
    assert roomy.decisions == 0


def test_blind_random_moves_lose_as_their_move_mix_and_a_hole_avoider_less():
    """On the CPU example's maps: a policy that never looks loses at the decision points as often as its
    move mix predicts; one that reads the surroundings line (never into a hole) loses far less."""
    env = make_env("frozen_lake", size=4, is_slippery=False, max_steps=10, describe_surroundings=True)
    seeds = CPU_EXAMPLE_VAL_SEEDS[:32]
    graphs = dict(zip(seeds, map_blind_baselines(env, seeds, horizon=10).graphs))
    rng = np.random.default_rng(0)
    blind, reader = LosingMoves(4), LosingMoves(4)
    for seed in seeds:
        for _ in range(10):
            moves = rng.choice(["Down", "Right"], size=10).tolist()
            blind.add_episode(graphs[seed], replayed_actions(env, seed, [f"<answer>{m}</answer>" for m in moves]), 10)
            observation, _ = env.reset(seed=seed)
            replies = []
            for _ in range(10):
                around = dict(part.split(": ") for part in observation.splitlines()[-1].rstrip(".").split(", "))
                move = rng.choice([m for m in ("Down", "Right") if around[m] != "hole"] or ["Up"])
                replies.append(f"<answer>{move}</answer>")
                observation, _, terminated, truncated, _ = env.step(replies[-1])
                if terminated or truncated:
                    break
            reader.add_episode(graphs[seed], replayed_actions(env, seed, replies), 10)
    assert blind.decisions > 100 and reader.decisions > 100
    assert abs(blind.agent_share - blind.move_mix_share) < 0.05
    assert reader.agent_share < 0.5 * reader.move_mix_share
