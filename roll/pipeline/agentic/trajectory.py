"""The typed samples an env manager produces, and what a failed episode leaves instead.

An env manager's `run_episode(seed, episode_key)` returns `list[Trajectory]`: one sample for the
trajectory-wise manager (the whole multi-turn conversation as one token row), one per turn for a
step-wise manager. `EnvironmentWorker` and `RolloutScheduler` carry these objects unchanged (they
pickle through Ray), and `trajectories_to_batch` (trajectory_batch.py) is the one function that
turns them into a training Batch. A failed episode is an `EpisodeFailureResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roll.data.vision import VisionInputs

STOP_REASONS = ("terminated", "truncated", "max_steps", "sequence_length")
FAILURE_KINDS = ("env_error", "env_timeout", "generation_error", "episode_error", "worker_error", "worker_died", "infer_worker_died")


@dataclass
class TokenBuffer:
    """A sample's token row, built turn by turn: ids, response mask and generation log-probs always
    have the same length because they are only ever appended together.

    input_ids: `[L]` token ids of prompt, responses and observations in order.
    response_mask: `[L]` 1 on tokens the policy generated, 0 on prompt and observation tokens.
    logprobs: `[L]` log-probability the policy gave each generated token when it sampled it; 0.0 on
        tokens it did not generate.
    weight_version: the oldest policy-weight version that generated a response here (-1: none known).
    """

    input_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    weight_version: int = -1

    def add_prompt(self, ids: list[int]) -> None:
        """Tokens the policy did not choose (system prompt, user turns, the template's framing)."""
        self.input_ids.extend(int(t) for t in ids)
        self.response_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))

    def add_response(self, ids: list[int], logprobs: list[float], weight_version: int = -1) -> None:
        """Tokens the policy generated, with the log-probs recorded when they were sampled and the
        version of the weights that sampled them (GenerationResult.weight_version; -1: unknown)."""
        if len(ids) != len(logprobs):
            raise ValueError(f"a response of {len(ids)} tokens came with {len(logprobs)} log-probs")
        if weight_version >= 0:
            known = [v for v in (self.weight_version, weight_version) if v >= 0]
            self.weight_version = min(known)
        self.input_ids.extend(int(t) for t in ids)
        self.response_mask.extend([1] * len(ids))
        self.logprobs.extend(float(lp) for lp in logprobs)

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class Trajectory:
    """One training sample from one episode (L tokens, T turns in the episode or in this sample).

    Set by the env manager:
        input_ids: `[L]` int token ids of the conversation (chat_tokens.py: the model's own ids for
            its responses, the chat template's tokens for everything else).
        response_mask: `[L]` 1 on generated tokens (what the loss trains), 0 elsewhere.
        infer_logprobs: `[L]` the generating policy's log-prob of each generated token, 0.0 elsewhere.
        score: the episode's score, the sum of `step_rewards` (what reward normalisation reads).
        step_rewards: `[T]` the env's reward for each turn of the episode (a step sample carries the
            whole episode's, so its own turn's is `step_rewards[step_index]`).
        actions: `[T]` the model's text of each turn of the episode as the env received it.
        messages: the chat messages `[{"role", "content"}]` the ids render (system, user, assistant ...);
            for a step sample, that turn's chat.
        env_metrics: episode metrics by name (success, action_is_valid, num_actions, env-specific
            ones), each aggregated over the turns by the env's `metrics_agg_mode`.
        tag: the `custom_envs` key of the env that played it.
        env_seed: the seed the env was reset with (a GRPO group shares it).
        stop_reason: why the episode ended: one of STOP_REASONS.
        generated_tokens: tokens the policy generated in this sample (= sum of response_mask).
        step_index: which turn (0-based) this sample is, for managers that emit one sample per turn;
            None when the sample is the whole episode.
        state_key: a hashable description of the env state this sample acted in (e.g. the rendered
            observation), for estimators that group samples by state (GiGPO's anchor states); None
            when the manager does not provide one.
        turn_state_keys: `[T]` for a whole-episode sample, the state_key of each turn (the state its
            reply acted in), for step credit on whole episodes (adv_estimator traj_gigpo); None when
            the manager does not provide them.
        random_turns: the turns (0-based, as in `actions`) whose reply the manager played for
            `random_action_rate` instead of the policy; None when the run does not explore.
        weight_version: the oldest policy-weight version that generated any of its tokens (-1: not
            known, e.g. an external server); async training measures staleness with it.
        vision: the images of a vision-language sample (VisionInputs: processed pixels and grids, in
            the order their placeholder tokens appear in input_ids); None for a text sample.
        extras: further per-sample values a custom manager attaches, by name; each name becomes a
            `batch.meta` column (None for samples that lack it). Names must not shadow a field.

    Set on the way back (env manager code leaves the defaults):
        env_id: index of the env (manager) that played it, set by EnvironmentWorker.
        time_s: wall time of the episode in seconds, set by EnvironmentWorker.
        traj_id: unique id of the episode in its batch, e.g. "train3-g5-1", set by RolloutScheduler.
        traj_group_id: id shared by the episodes of one GRPO group, e.g. "train3-g5", set by
            RolloutScheduler (reward normalisation's `grouping: traj_group_id` reads it).
    """

    input_ids: list[int]
    response_mask: list[int]
    infer_logprobs: list[float]
    score: float
    step_rewards: list[float]
    actions: list[str]
    messages: list[dict[str, str]]
    env_metrics: dict[str, float]
    tag: str
    env_seed: int
    stop_reason: str
    generated_tokens: int
    step_index: int | None = None
    state_key: str | None = None
    turn_state_keys: list[str] | None = None
    random_turns: list[int] | None = None
    weight_version: int = -1
    vision: VisionInputs | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    env_id: int = -1
    time_s: float = 0.0
    traj_id: str = ""
    traj_group_id: str = ""

    def __post_init__(self) -> None:
        lengths = {len(self.input_ids), len(self.response_mask), len(self.infer_logprobs)}
        if len(lengths) != 1:
            raise ValueError(f"trajectory of env tag={self.tag} seed={self.env_seed}: input_ids, response_mask and "
                             f"infer_logprobs differ in length ({len(self.input_ids)}, {len(self.response_mask)}, "
                             f"{len(self.infer_logprobs)}); build them with a TokenBuffer")
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {self.stop_reason!r}")

    @classmethod
    def from_tokens(cls, tokens: TokenBuffer, **fields: Any) -> "Trajectory":
        """A trajectory whose token row is `tokens`; `fields` are the other fields."""
        fields.setdefault("weight_version", tokens.weight_version)
        return cls(input_ids=list(tokens.input_ids), response_mask=list(tokens.response_mask),
                   infer_logprobs=list(tokens.logprobs), **fields)


class EpisodeFailure(RuntimeError):
    """Raised inside an env manager for an episode that could not finish (the env raised or hung,
    generation failed); EnvironmentWorker turns it into an EpisodeFailureResult."""

    def __init__(self, kind: str, tag: str, seed: int, detail: str) -> None:
        super().__init__(f"{kind} in env tag={tag} seed={seed}: {detail}")
        self.kind, self.tag, self.seed, self.detail = kind, tag, seed, detail


@dataclass
class EpisodeFailureResult:
    """What a failed episode returns instead of samples; RolloutScheduler counts it (under
    `rollout/failures/<kind>`), logs it, and re-runs the episode's group with a fresh seed.

    kind: one of FAILURE_KINDS. tag, env_seed: the env and seed that failed. detail: the error text.
    env_id: the env (manager) that played it, -1 when the worker itself was lost.
    """

    kind: str
    tag: str
    env_seed: int
    detail: str
    env_id: int = -1
