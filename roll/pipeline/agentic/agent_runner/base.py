"""The agent-runner contract (ROLL's AgentRunner.run_job shape), and the bookkeeping the bundled
runners share for playing a roll env."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

import openai

from roll.agentic.env import BaseEnv, make_env
from roll.configs.agentic_config import CustomEnvConfig
from roll.pipeline.agentic.trajectory import STOP_REASONS


@dataclass
class EpisodeResult:
    """What an agent runner returns for one episode.

    score: the episode's reward (what GRPO compares within a group).
    step_scores: the reward of each turn, when the agent knows them (`Trajectory.step_rewards`).
    metrics: episode metrics by name (e.g. success), averaged per tag in the run's metrics.
    stop_reason: why the episode ended, one of roll's STOP_REASONS (terminated, truncated, max_steps,
        sequence_length: the server answered `context_length_exceeded`).
    """

    score: float
    step_scores: list[float] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    stop_reason: str = "terminated"

    def __post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"EpisodeResult.stop_reason must be one of {STOP_REASONS}, got {self.stop_reason!r}")


class AgentRunner:
    """Base class for agent runners (subclassing is optional: any class with this method works).

    `run_episode(seed, base_url, env_config)`: play one episode from `seed`, sending every LLM call to
    `base_url` (an OpenAI-compatible `/v1` URL that belongs to this episode; any api key works) and
    return an EpisodeResult. `env_config` is the run's `custom_envs.<tag>` entry (CustomEnvConfig:
    env_type, env_config, max_steps, max_tokens_per_step, agent_system_template, ...). Raising fails
    the episode (reported, and its group re-run); so does running past the manager's timeout."""

    plays_roll_env = False  # True: it plays the entry's roll env, so env_type must name one

    def run_episode(self, seed: int, base_url: str, env_config: CustomEnvConfig) -> EpisodeResult:
        raise NotImplementedError


def as_episode_result(value: Any) -> EpisodeResult:
    """An EpisodeResult from what a runner returned: an EpisodeResult, or a mapping / object with
    `score` (and optionally `step_scores`, `metrics`), so user code need not import roll."""
    if isinstance(value, EpisodeResult):
        return value
    get = value.get if isinstance(value, Mapping) else (lambda name, default=None: getattr(value, name, default))
    score = get("score", None)
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise TypeError(f"an agent runner must return an EpisodeResult (or a dict) with a numeric score, got {value!r}")
    return EpisodeResult(float(score), [float(s) for s in get("step_scores", None) or []],
                         {k: float(v) for k, v in (get("metrics", None) or {}).items()},
                         get("stop_reason", None) or "terminated")


@dataclass
class EnvPlay:
    """A roll env being played by a runner: its rewards and per-step metrics, aggregated the way the
    env managers aggregate them."""

    env: BaseEnv
    rewards: list[float] = field(default_factory=list)
    step_metrics: list[dict[str, float]] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, env_config: CustomEnvConfig) -> "EnvPlay":
        return cls(make_env(env_config.env_type, **dict(env_config.env_config)))

    stop_reason: str = "max_steps"

    def step(self, text: str) -> tuple[str, bool]:
        """Plays `text`; returns (observation, episode over)."""
        observation, reward, terminated, truncated, info = self.env.step(text)
        if terminated or truncated:
            self.stop_reason = "terminated" if terminated else "truncated"
        self.rewards.append(float(reward))
        self.step_metrics.append(dict(info.get("metrics", {})))
        self.modes.update(info.get("metrics_agg_mode", {}))
        return observation, bool(terminated or truncated)

    def result(self) -> EpisodeResult:
        metrics: dict[str, float] = {}
        for key in {k for step in self.step_metrics for k in step}:
            values = [float(step[key]) for step in self.step_metrics if key in step]
            mode = self.modes.get(key, "mean")
            metrics[key] = {"sum": sum(values), "last": values[-1], "max": max(values)}.get(mode, sum(values) / len(values))
        metrics["num_actions"] = float(len(self.rewards))
        return EpisodeResult(sum(self.rewards), list(self.rewards), metrics, self.stop_reason)


def out_of_context(error: Exception) -> bool:
    """The server refused a call because its prompt leaves no room in `sequence_length`: the episode
    ends there (stop_reason sequence_length), as roll's own managers end it."""
    return isinstance(error, openai.BadRequestError) and getattr(error, "code", None) == "context_length_exceeded"


def with_env_kwargs(env_config: CustomEnvConfig, **kwargs: Any) -> CustomEnvConfig:
    """The entry with more env kwargs (the manager's format_penalty override)."""
    return dataclasses.replace(env_config, env_config={**env_config.env_config, **kwargs})
