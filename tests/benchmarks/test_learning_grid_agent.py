"""benchmarks/learning_grid_agent.py's baseline: the example agent's own code, driven through roll's OpenAI
server by a policy that answers every call with a random `move` tool call, wins about as often as a
random walk of the same length does on the same boards; one that always makes the same move wins exactly
where a plain-Python walk in that direction does."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

from transformers import AutoTokenizer

from benchmarks.learning_grid_agent import best_fixed_move_success, random_move_success

SEEDS = list(range(16))
# the tiny tokenizer spells the call out in about 80 tokens (SmolLM2: about 30)
ENV = SimpleNamespace(max_steps=8, max_tokens_per_step=128)
MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]


def walk_success(seeds: list[int], plays: int, moves: list[tuple[int, int]]) -> float:
    """The same game as examples/agents/grid_agent.py, walked in plain Python with moves drawn from `moves`."""
    rng, wins = random.Random(7), 0
    for _ in range(plays):
        for seed in seeds:
            cells = [(r, c) for r in range(4) for c in range(4)]
            me, goal = random.Random(seed).sample(cells, 2)
            for _ in range(ENV.max_steps):
                dr, dc = rng.choice(moves)
                me = (min(max(me[0] + dr, 0), 3), min(max(me[1] + dc, 0), 3))
                if me == goal:
                    break
            wins += me == goal
    return wins / (plays * len(seeds))


def test_random_moves_through_the_agent_match_a_random_walk(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    through_agent = random_move_success(SEEDS, tokenizer, ENV, plays=3)
    expected = walk_success(SEEDS, plays=400, moves=MOVES)
    # 48 episodes: the standard error of the mean is about 0.065
    assert abs(through_agent - expected) < 0.2, (through_agent, expected)
    assert 0.05 < through_agent < 0.6


def test_the_best_fixed_move_is_the_best_straight_walk(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    best, success = best_fixed_move_success(SEEDS, tokenizer, ENV)
    straight = {name: walk_success(SEEDS, plays=1, moves=[move]) for name, move in zip(["Up", "Down", "Left", "Right"], MOVES)}
    assert success == max(straight.values()) and straight[best] == success
    assert 0 < success < 0.5  # a straight line reaches only the goals in its row or column


def call(direction: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "move", "arguments": {"direction": direction}}}]}


def test_moves_toward_goal_reads_the_hint_before_each_call_and_counts_an_episode_once():
    from benchmarks.learning_grid_agent import moves_toward_goal

    chat = [{"role": "user", "content": "P _\n_ G\nG is 1 Down and 1 Right."}, call("Down"),
            {"role": "tool", "content": "_ _\nP G\nG is 1 Right."}, call("Up"), call(" Right")]
    # two samples of one episode carry its chat: it counts once; " Right" is not a move the agent makes
    rows = [{"traj_id": "v1-g0-0", "messages": chat[:2]}, {"traj_id": "v1-g0-0", "messages": chat}]
    assert moves_toward_goal(rows) == 1 / 3
    assert math.isnan(moves_toward_goal([{"traj_id": "v1-g1-0", "messages": chat[:1]}]))  # no call: no share
