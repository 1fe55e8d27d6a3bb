"""Scripted policies: play any registered env without a model.

They write model-style text (``<answer>Left</answer>``, or with a think part when the env's
``action_pattern`` wants one), so the env parses them like a model's output. Uses: SFT warm-up
data, debugging rollouts, and each env's ceiling (the optimal policy's success rate).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal, Optional

from roll.agentic.env.base import BaseEnv

PolicyKind = Literal["random", "optimal"]
TOOL_POLICY = "tool"  # the scripted tool user (tool_use_text), for envs with a Python tool
SFT_POLICIES = ("random", "optimal", TOOL_POLICY)  # sft_warmup.policy


def scripted_answer(env: BaseEnv, kind: PolicyKind = "random", rng: Optional[random.Random] = None) -> str:
    """The bare answer (``"Left"``, ``"(3 + 5) * 2"``, ``"50"``) the policy gives in ``env``'s state."""
    if kind == "random":
        return env.random_answer(rng if rng is not None else random.Random())
    if kind == "optimal":
        answer = env.optimal_answer()
        if answer is None:
            raise ValueError(f"{type(env).__name__} has no optimal move here (no solver, or no solution)")
        return answer
    raise ValueError(f"unknown policy kind {kind!r}; use 'random' or 'optimal'")


def scripted_action(
    env: BaseEnv, kind: PolicyKind = "random", rng: Optional[random.Random] = None, think: Optional[str] = None
) -> str:
    """Model-style text for the policy's answer, in the format ``env.config.action_pattern`` parses."""
    answer = scripted_answer(env, kind, rng)
    return env.format_answer(answer, think if think is not None else f"Scripted {kind} move.")


def tool_use_text(env: BaseEnv, last_message: str) -> str:
    """The scripted tool user's reply: while it has not run the tool it calls it (in the env's call
    format) with code that computes the task from the question's own data; then it answers the last
    integer in ``last_message`` (the tool's output, as the model sees it). The answer comes only from
    the tool: a failed run gives a wrong answer, never a known one."""
    solver_call = getattr(env, "solver_call", None)
    if not callable(solver_call):
        raise ValueError(f"policy {TOOL_POLICY!r} needs an env with a Python tool (env_type tool_use), not {type(env).__name__}")
    if env.tool_calls == 0:
        return solver_call()
    numbers = re.findall(r"-?\d+", last_message)
    return env.format_answer(numbers[-1] if numbers else "0", "The tool printed the result.")


@dataclass
class ScriptedEpisode:
    seed: int
    total_reward: float = 0.0
    num_turns: int = 0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    turns: list[dict] = field(default_factory=list)  # observation, action text, reward per turn


def run_scripted_episode(
    env: BaseEnv, seed: int, kind: PolicyKind = "random", rng: Optional[random.Random] = None
) -> ScriptedEpisode:
    """Reset ``env`` with ``seed`` and play it to the end with the scripted policy."""
    rng = rng if rng is not None else random.Random(seed)
    observation, _ = env.reset(seed=seed)
    episode = ScriptedEpisode(seed=seed)
    done = False
    while not done:
        text = scripted_action(env, kind, rng)
        next_observation, reward, terminated, truncated, info = env.step(text)
        episode.turns.append({"observation": observation, "action": text, "reward": reward})
        episode.total_reward += reward
        episode.num_turns += 1
        episode.terminated, episode.truncated = terminated, truncated
        episode.success = bool(info["metrics"]["success"])
        observation, done = next_observation, terminated or truncated
    return episode
