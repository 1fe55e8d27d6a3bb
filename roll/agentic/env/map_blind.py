"""Map-blind baselines: how far a policy gets on a set of maps without ever looking at them.

A success rate means little alone: on 4x4 FrozenLake with the start top-left and the goal
bottom-right, the fixed sequence Right x3, Down x3 solves almost half the maps. So beside an
agent's validation success we report, on the same maps (same env, same seeds):

- the best fixed move sequence: one list of moves, played on every map until the episode ends;
- the best biased random policy: each turn draws a move from one fixed distribution (the best
  distribution on a grid of step ``1 / bias_resolution``);
- uniform random valid moves.

None of them reads the observation, so an agent that beats them all reads the board.

How: each map's states within the episode's horizon are explored once by playing the real env
(``copy.deepcopy`` of the env and ``env.step`` with model-style text), keyed by the rendered
observation. The baselines are then exact numbers on that graph (no sampling noise): the fixed
sequence by a depth-first search over move sequences, pruned by "maps still solvable in the moves left"; the random
policies by propagating the state distribution for the episode's horizon. This needs an env
whose move results are deterministic and whose render shows its whole state, so only the envs in
``DETERMINISTIC_GRID_ENVS`` (non-slippery) are accepted.
"""

from __future__ import annotations

import copy
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from roll.agentic.env.base import BaseEnv
from roll.agentic.env.frozen_lake.env import FrozenLakeEnv
from roll.agentic.env.sokoban.env import SokobanEnv

DETERMINISTIC_GRID_ENVS: tuple[type[BaseEnv], ...] = (FrozenLakeEnv, SokobanEnv)
UNSOLVABLE = 1 << 30


@dataclass(frozen=True)
class MapGraph:
    """One map's states within the horizon. ``next_state[s][a]``: the state after action a (terminal states
    lead to themselves); ``solved[s]``: s is a success; ``moves_to_solve[s]``: fewest moves from s
    to a success (UNSOLVABLE if none)."""

    next_state: tuple[tuple[int, ...], ...]
    solved: tuple[bool, ...]
    moves_to_solve: tuple[int, ...]


@dataclass(frozen=True)
class BlindBaselines:
    """The map-blind baselines of one set of maps (``seeds``, in this order)."""

    action_names: tuple[str, ...]
    seeds: tuple[int, ...]
    horizon: int
    best_sequence: tuple[str, ...]
    sequence_solves: tuple[bool, ...]  # per seed: does the best fixed sequence solve that map
    sequence_search_complete: bool  # False: the node budget ran out; the sequence is the best found
    best_bias: tuple[float, ...]  # per action
    biased_random_success: float
    uniform_random_success: float
    # per seed: the map's state graph, kept to ask later which of an agent's solved maps one sequence explains
    graphs: tuple[MapGraph, ...] = field(default=(), repr=False, compare=False)

    @property
    def fixed_sequence_success(self) -> float:
        return sum(self.sequence_solves) / len(self.sequence_solves)

    @property
    def best_success(self) -> float:
        return max(self.fixed_sequence_success, self.biased_random_success, self.uniform_random_success)


def check_supported(env: BaseEnv) -> None:
    """Raises a ValueError naming the env when its baselines cannot be computed exactly."""
    if not isinstance(env, DETERMINISTIC_GRID_ENVS):
        names = ", ".join(cls.__name__ for cls in DETERMINISTIC_GRID_ENVS)
        raise ValueError(f"map-blind baselines need a deterministic grid env ({names}), got {type(env).__name__}")
    if getattr(env.config, "is_slippery", False):
        raise ValueError(f"map-blind baselines need deterministic moves; {type(env).__name__} has is_slippery=true")


def _shared_values(env: BaseEnv) -> dict[int, object]:
    """A deepcopy memo that shares the env's config and its hashable (immutable) attributes, such as
    a room's fixed cells, between copies: copying them is most of the cost and changes nothing."""
    memo: dict[int, object] = {id(env.config): env.config}
    for value in vars(env).values():
        try:
            hash(value)
        except TypeError:
            continue
        memo[id(value)] = value
    return memo


def _step_copy(env: BaseEnv, text: str) -> tuple[BaseEnv, bool, bool]:
    """A copy of ``env`` after one step with ``text``: (copy, terminated, success). The copy's turn
    counter restarts so the env's own max_steps never truncates the exploration (the horizon is
    applied by the callers instead)."""
    child = copy.deepcopy(env, memo=_shared_values(env))
    child.num_turns = 0
    _, _, terminated, _, info = child.step(text)
    return child, terminated, bool(info["metrics"]["success"])


def explore_map(env: BaseEnv, seed: int, horizon: int, max_states: int = 200_000) -> MapGraph:
    """Every state reachable from ``env.reset(seed)`` in at most ``horizon`` legal moves, by playing
    the real env. States first reached at depth ``horizon`` are kept without their moves (they lead
    to themselves): no episode of ``horizon`` moves steps on from them."""
    check_supported(env)
    env.reset(seed=seed)
    texts = [env.format_answer(name) for name in env.action_names()]
    keys = {(env.render(), False): 0}
    frontier = deque([(env, False, 0)])
    next_state: list[list[int]] = []
    solved: list[bool] = [env.is_success()]
    while frontier:
        state_env, terminal, depth = frontier.popleft()
        index = len(next_state)
        if terminal or depth == horizon:
            next_state.append([index] * len(texts))
            continue
        row = []
        for text in texts:
            child, terminated, success = _step_copy(state_env, text)
            key = (child.render(), terminated)
            if key not in keys:
                if len(keys) >= max_states:
                    raise ValueError(f"seed {seed}: more than {max_states} states within {horizon} moves; "
                                     "map-blind baselines are meant for small grids and short episodes")
                keys[key] = len(keys)
                solved.append(success)
                frontier.append((child, terminated, depth + 1))
            row.append(keys[key])
        next_state.append(row)
    return MapGraph(tuple(map(tuple, next_state)), tuple(solved), _moves_to_solve(next_state, solved))


def _moves_to_solve(next_state: Sequence[Sequence[int]], solved: Sequence[bool]) -> tuple[int, ...]:
    """Backward breadth-first search from the solved states."""
    parents: list[list[int]] = [[] for _ in solved]
    for s, row in enumerate(next_state):
        for t in set(row):
            if t != s:
                parents[t].append(s)
    dist = [0 if ok else UNSOLVABLE for ok in solved]
    queue = deque(s for s, ok in enumerate(solved) if ok)
    while queue:
        t = queue.popleft()
        for s in parents[t]:
            if dist[s] == UNSOLVABLE and not solved[s]:
                dist[s] = dist[t] + 1
                queue.append(s)
    return tuple(dist)


def best_fixed_sequence(graphs: Sequence[MapGraph], horizon: int, max_nodes: int = 200_000
                        ) -> tuple[tuple[int, ...], tuple[bool, ...], bool]:
    """The move sequence of at most ``horizon`` moves that solves the most maps (ties: the first
    found in depth-first order): (actions, solved per map, search complete)."""
    num_actions = len(graphs[0].next_state[0])
    start = tuple(0 for _ in graphs)
    best: dict = {"count": -1, "sequence": (), "state": start}
    seen: dict[tuple[int, ...], int] = {}  # joint state -> most moves left it was searched with
    nodes = 0

    def search(state: tuple[int, ...], moves_left: int, sequence: tuple[int, ...]) -> bool:
        nonlocal nodes
        solved = sum(g.solved[s] for g, s in zip(graphs, state))
        if solved > best["count"]:
            best.update(count=solved, sequence=sequence, state=state)
        reachable = sum(g.moves_to_solve[s] <= moves_left for g, s in zip(graphs, state))
        if moves_left == 0 or reachable <= best["count"] or seen.get(state, -1) >= moves_left:
            return True
        seen[state] = moves_left
        nodes += 1
        if nodes > max_nodes:
            return False
        for action in range(num_actions):
            child = tuple(g.next_state[s][action] for g, s in zip(graphs, state))
            if child != state and not search(child, moves_left - 1, sequence + (action,)):
                return False
        return True

    complete = search(start, horizon, ())
    solves = tuple(g.solved[s] for g, s in zip(graphs, best["state"]))
    return best["sequence"], solves, complete


def random_policy_success(graphs: Sequence[MapGraph], horizon: int, biases: np.ndarray) -> np.ndarray:
    """Exact mean success over the maps of the policies that draw action a with probability
    ``biases[k, a]`` every turn, for ``horizon`` turns: one number per row of ``biases``."""
    offsets = np.cumsum([0] + [len(g.solved) for g in graphs])
    next_state = torch.cat([torch.tensor(g.next_state) + int(off) for g, off in zip(graphs, offsets)])
    solved = torch.cat([torch.tensor(g.solved, dtype=torch.bool) for g in graphs])
    bias = torch.as_tensor(biases, dtype=torch.float64)
    mass = torch.zeros(len(solved), len(bias), dtype=torch.float64)
    mass[torch.as_tensor(offsets[:-1])] = 1.0  # every map starts in its state 0
    for _ in range(horizon):
        moved = torch.zeros_like(mass)
        for action in range(next_state.shape[1]):
            moved.index_add_(0, next_state[:, action], mass * bias[:, action])
        mass = moved
    return (mass[solved].sum(dim=0) / len(graphs)).numpy()


def bias_grid(num_actions: int, resolution: int) -> np.ndarray:
    """Every distribution over the actions whose probabilities are multiples of 1/resolution."""
    rows = [c for c in itertools.product(range(resolution + 1), repeat=num_actions - 1) if sum(c) <= resolution]
    return np.asarray([[*c, resolution - sum(c)] for c in rows], dtype=float) / resolution


def map_blind_baselines(env: BaseEnv, seeds: Sequence[int], horizon: int, bias_resolution: int = 20,
                        max_nodes: int = 200_000) -> BlindBaselines:
    """The three map-blind baselines of ``env`` on the maps of ``seeds`` for episodes of ``horizon`` moves."""
    if not seeds:
        raise ValueError("map-blind baselines need at least one seed")
    if horizon < 1:
        raise ValueError(f"horizon must be at least 1 move, got {horizon}")
    graphs = [explore_map(env, seed, horizon) for seed in seeds]
    names = tuple(env.action_names())
    sequence, solves, complete = best_fixed_sequence(graphs, horizon, max_nodes)
    grid = bias_grid(len(names), bias_resolution)
    rates = random_policy_success(graphs, horizon, grid)
    best = int(np.argmax(rates))
    uniform = random_policy_success(graphs, horizon, np.full((1, len(names)), 1.0 / len(names)))[0]
    return BlindBaselines(
        action_names=names, seeds=tuple(seeds), horizon=horizon,
        best_sequence=tuple(names[a] for a in sequence), sequence_solves=solves, sequence_search_complete=complete,
        best_bias=tuple(float(p) for p in grid[best]), biased_random_success=float(rates[best]),
        uniform_random_success=float(uniform), graphs=tuple(graphs),
    )


def solved_beyond_sequence(agent_success: Sequence[float], sequence_solves: Sequence[bool]) -> float:
    """Of the maps the agent solves (``agent_success[i]``: its success rate on map i), the share on
    which the best fixed sequence fails; 0 when the agent solves nothing."""
    if len(agent_success) != len(sequence_solves):
        raise ValueError(f"{len(agent_success)} agent results for {len(sequence_solves)} maps")
    total = sum(agent_success)
    if total == 0:
        return 0.0
    return sum(rate for rate, fixed in zip(agent_success, sequence_solves) if not fixed) / total


def solved_by_one_sequence(agent_success: Sequence[float], graphs: Sequence[MapGraph], horizon: int,
                           max_nodes: int = 200_000) -> float:
    """Of the maps the agent solved at least once (``agent_success[i] > 0`` on map i), the largest share
    that one fixed move sequence also solves; 0 when it solved none. 1.0 means a map-blind policy
    explains every map it solved, even when that sequence is not the best one on all the maps (an agent
    that learnt Down, Right, Down, Right... solves maps Right x3, Down x3 fails on without reading).
    Where the search hits ``max_nodes`` (large Sokoban sets) the share is the best found: a lower bound."""
    if len(agent_success) != len(graphs):
        raise ValueError(f"{len(agent_success)} agent results for {len(graphs)} maps")
    solved = [graph for rate, graph in zip(agent_success, graphs) if rate > 0]
    if not solved:
        return 0.0
    _, solves, _ = best_fixed_sequence(solved, horizon, max_nodes)
    return sum(solves) / len(solved)


@dataclass
class LosingMoves:
    """Does the agent avoid moves that lose the map, more than its move frequencies would by chance?

    A *decision point* is a turn at which some move keeps the map solvable in the moves left and some
    move does not (FrozenLake: a hole next to the player, or a detour with too few moves left; Sokoban:
    a push into a dead corner). ``agent_share``: of the agent's moves at decision points, the share that
    lost the map. ``move_mix_share``: the share its own move frequencies (over all its moves) would lose
    at the same points: what a policy that never reads the board, with the same move mix, loses."""

    num_actions: int
    decisions: int = 0
    losing_taken: int = 0
    losing_by_action: np.ndarray = field(init=False)  # per action: decision points at which it loses
    moves_by_action: np.ndarray = field(init=False)  # per action: the agent's moves, at any turn

    def __post_init__(self) -> None:
        self.losing_by_action = np.zeros(self.num_actions, dtype=np.int64)
        self.moves_by_action = np.zeros(self.num_actions, dtype=np.int64)

    def add_episode(self, graph: MapGraph, actions: Sequence[int | None], horizon: int) -> None:
        """One episode on ``graph``'s map: its actions in turn order (None: a reply with no move,
        which spends a turn and leaves the state as it was)."""
        state = 0
        for turn, action in enumerate(actions[:horizon]):
            if action is not None:
                moves_left = horizon - turn - 1
                keeps = np.array([graph.moves_to_solve[nxt] <= moves_left for nxt in graph.next_state[state]])
                if keeps.any() and not keeps.all():
                    self.decisions += 1
                    self.losing_by_action += ~keeps
                    self.losing_taken += int(not keeps[action])
                self.moves_by_action[action] += 1
                state = graph.next_state[state][action]

    @property
    def agent_share(self) -> float | None:
        """None without decision points (nothing to avoid, or the goal out of reach all along)."""
        return self.losing_taken / self.decisions if self.decisions else None

    @property
    def move_mix_share(self) -> float | None:
        if not self.decisions:
            return None
        return float(self.losing_by_action @ self.moves_by_action) / self.moves_by_action.sum() / self.decisions


def replayed_actions(env: BaseEnv, seed: int, replies: Sequence[str]) -> list[int | None]:
    """The action index (in ``env.action_names()`` order) of each reply of an episode, parsed by
    replaying it in ``env`` from ``seed`` (None: the reply held no valid move)."""
    names = env.action_names()
    env.reset(seed=seed)
    actions: list[int | None] = []
    for reply in replies:
        _, _, terminated, truncated, info = env.step(reply)
        actions.append(None if info["action"] is None else names.index(info["action"]))
        if terminated or truncated:
            break
    return actions
