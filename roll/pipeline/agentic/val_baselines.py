"""Map-blind baselines beside every validation (roll/agentic/env/map_blind.py explains them).

Computed from the validation batch itself, so they are measured on exactly the maps the agent was
validated on (its tags and env seeds), once per set of maps (validation seeds are fixed, so once
per run). Metrics, per tag of a deterministic grid env (FrozenLake non-slippery, Sokoban):

- ``val/blind/<tag>/fixed_sequence``: success of the best fixed move sequence;
- ``val/blind/<tag>/biased_random``: success of the best biased random policy;
- ``val/blind/<tag>/uniform_random``: success of uniform random valid moves;
- ``val/blind/<tag>/best``: the largest of the three: the number to beat;
- ``val/blind/<tag>/agent_solved_beyond_sequence``: of the maps the agent solved, the share on
  which the best fixed sequence fails (0 for an agent that only replays the sequence);
- ``val/blind/<tag>/agent_solved_by_one_sequence``: of the maps the agent solved, the largest share
  one fixed sequence (any, not only the best) also solves: 1.0 means its successes need no reading;
- ``val/blind/<tag>/agent_losing_moves``: at the turns where one move keeps the map solvable and
  another loses it (a hole next to the player, say), the share of the agent's moves that lost it;
- ``val/blind/<tag>/losing_moves_by_move_mix``: the share the agent's own move frequencies would lose
  at the same turns without reading the board. Below it, the agent reads the board.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from roll.agentic.env.base import BaseEnv
from roll.agentic.env.map_blind import (
    BlindBaselines,
    LosingMoves,
    check_supported,
    map_blind_baselines,
    replayed_actions,
    solved_beyond_sequence,
    solved_by_one_sequence,
)
from roll.agentic.env.registry import make_env
from roll.data.batch import Batch
from roll.data.episodes import first_row_per_episode

if TYPE_CHECKING:
    from roll.configs.agentic_config import CustomEnvConfig

logger = logging.getLogger("roll.pipeline")


def agent_success_by_map(batch: Batch) -> dict[str, dict[int, float]]:
    """tag -> env seed -> the agent's mean success over its episodes on that map (seeds in first-seen
    order; a step-wise episode's turn samples count once)."""
    runs: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in first_row_per_episode(batch):
        success = float(batch["env_metrics"][row].get("success", 0.0))
        runs[batch["tag"][row]][int(batch["env_seed"][row])].append(success)
    return {tag: {seed: sum(v) / len(v) for seed, v in seeds.items()} for tag, seeds in runs.items()}


def losing_moves(batch: Batch, tag: str, env: BaseEnv, result: BlindBaselines) -> LosingMoves:
    """The agent's moves at the decision points of its validation episodes of ``tag``."""
    graph_of = dict(zip(result.seeds, result.graphs))
    tally = LosingMoves(len(result.action_names))
    for row in first_row_per_episode(batch):
        if batch["tag"][row] == tag:
            seed = int(batch["env_seed"][row])
            tally.add_episode(graph_of[seed], replayed_actions(env, seed, batch["actions"][row]), result.horizon)
    return tally


class ValidationBaselines:
    """Map-blind baselines of each validation batch's maps, cached by (tag, seeds)."""

    def __init__(self, custom_envs: dict[str, "CustomEnvConfig"]) -> None:
        self.custom_envs = custom_envs
        self.cache: dict[tuple[str, tuple[int, ...]], BlindBaselines] = {}
        self.unsupported: set[str] = set()

    def baselines(self, tag: str, seeds: tuple[int, ...]) -> BlindBaselines | None:
        """The baselines of ``tag``'s env on the maps of ``seeds``; None for an env they do not apply to."""
        if tag in self.unsupported:
            return None
        if (tag, seeds) not in self.cache:
            spec = self.custom_envs[tag]
            if spec.env_type is None:  # an agent runner plays its own game: no roll env to replay
                logger.info("no map-blind baselines for %s: its agent runner brings its own game", tag)
                self.unsupported.add(tag)
                return None
            env = make_env(spec.env_type, **spec.env_config)
            try:
                check_supported(env)
            except ValueError as exc:
                logger.info("no map-blind baselines for %s: %s", tag, exc)
                self.unsupported.add(tag)
                return None
            horizon = min(spec.max_steps, env.config.max_steps)
            result = map_blind_baselines(env, seeds, horizon)
            logger.info("map-blind baselines on the %d validation maps of %s (%d moves): best fixed sequence %s "
                        "%.3f%s, best biased random %s %.3f, uniform random %.3f", len(seeds), tag, horizon,
                        ",".join(result.best_sequence), result.fixed_sequence_success,
                        "" if result.sequence_search_complete else " (search budget hit: best found)",
                        dict(zip(result.action_names, result.best_bias)), result.biased_random_success,
                        result.uniform_random_success)
            self.cache[(tag, seeds)] = result
        return self.cache[(tag, seeds)]

    def metrics(self, batch: Batch) -> dict[str, float]:
        out: dict[str, float] = {}
        for tag, by_seed in agent_success_by_map(batch).items():
            result = self.baselines(tag, tuple(by_seed))
            if result is None:
                continue
            prefix = f"val/blind/{tag}"
            out[f"{prefix}/fixed_sequence"] = result.fixed_sequence_success
            out[f"{prefix}/biased_random"] = result.biased_random_success
            out[f"{prefix}/uniform_random"] = result.uniform_random_success
            out[f"{prefix}/best"] = result.best_success
            out[f"{prefix}/maps"] = float(len(by_seed))
            out[f"{prefix}/agent_solved_beyond_sequence"] = solved_beyond_sequence(
                list(by_seed.values()), result.sequence_solves)
            out[f"{prefix}/agent_solved_by_one_sequence"] = solved_by_one_sequence(
                list(by_seed.values()), result.graphs, result.horizon)
            spec = self.custom_envs[tag]
            tally = losing_moves(batch, tag, make_env(spec.env_type, **spec.env_config), result)
            if tally.decisions:  # else no turn of these episodes had a move to avoid
                out[f"{prefix}/agent_losing_moves"] = tally.agent_share
                out[f"{prefix}/losing_moves_by_move_mix"] = tally.move_mix_share
        return out
