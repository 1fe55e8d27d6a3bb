"""Step-level credit: the `gigpo`, `step_reinforce` and `agentic_reinforce` advantage estimators.

`gigpo` and `step_reinforce` train on step samples: one sample per turn, as the step-wise env
manager (roll/pipeline/agentic/env_manager/step_env_manager.py) makes them. Each sample's batch meta
carries `traj_id` (its episode), `traj_group_id` (its GRPO group), `step_index` (which turn, from 0),
`state_key` (the env state the turn acted in) and `step_rewards` (the env reward of every turn of
its episode). From these:

- the discounted step return of turn t: R_t = Σ_{k ≥ t} γ_s^(k−t) r_k, with γ_s = `step_reward_gamma`;
- `step_reinforce`: the response-level reward of a sample is R_t normalised within its reward group
  (`reward_normalization.grouping`, with its `method`);
- `gigpo` (Feng et al. 2025, arXiv 2505.10978): w_e · Â_episode + w_s · Â_step, where Â_episode is
  the episode score normalised among the episodes of its GRPO group (each episode counted once,
  whatever its length) and Â_step is R_t normalised within its anchor group: the samples of the same
  GRPO group that acted in the same env state (same `state_key`). A state seen once gives Â_step = 0.

Both place that reward on the sample's last response token (any token-level KL penalty stays where
it was) and take the discounted return over the response tokens with `gamma`, as `reinforce` does.

`agentic_reinforce` works on any sample, whole trajectories included: each response segment (one
turn's reply) gets one value, the segment's reward plus γ times the next segment's value, so the
discount is per turn, not per token.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from roll.algorithms.advantages import AdvantageInputs, compute_discounted_returns, register_adv_estimator
from roll.algorithms.rewards import normalize_rewards, token_level_rewards

STEP_META = ("traj_id", "traj_group_id", "step_index", "state_key", "step_rewards")


@dataclass(frozen=True)
class StepCreditOptions:
    """The config values the step-level estimators read (ROLL's defaults)."""

    step_reward_gamma: float = 0.95
    episode_reward_weight: float = 1.0
    step_reward_weight: float = 1.0
    cap_idle_turn_advantage: bool = False
    norm_method: str = "mean_std"
    norm_mean_type: str | None = None
    norm_std_type: str | None = None
    norm_grouping: str = "traj_group_id"

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "StepCreditOptions":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in options.items() if k in known})

    def normalize(self, values: Tensor, groups: Sequence[Hashable]) -> Tensor:
        return normalize_rewards(values, groups, self.norm_method, self.norm_mean_type, self.norm_std_type)


def discounted_step_return(step_rewards: Sequence[float], step_index: int, gamma: float) -> float:
    """R_t = Σ_{k ≥ t} γ^(k−t) r_k: what the episode earned from turn `step_index` on."""
    if not 0 <= step_index < len(step_rewards):
        raise ValueError(f"step_index {step_index} is outside an episode of {len(step_rewards)} turns")
    total = 0.0
    for reward in reversed(step_rewards[step_index:]):
        total = float(reward) + gamma * total
    return total


def step_returns(step_rewards: Sequence[Sequence[float]], step_index: Sequence[int], gamma: float) -> Tensor:
    """`[B]` float64: each step sample's discounted step return."""
    return torch.tensor([discounted_step_return(r, t, gamma) for r, t in zip(step_rewards, step_index)],
                        dtype=torch.float64)


def episode_normalized(scores: Tensor, traj_ids: Sequence[Hashable], group_ids: Sequence[Hashable],
                       options: StepCreditOptions) -> Tensor:
    """`[B]`: each sample's episode score normalised among the episodes of its group, one value per
    episode (an episode of 8 turns weighs no more than one of 2)."""
    first: dict[Hashable, int] = {}
    for i, traj in enumerate(traj_ids):
        first.setdefault(traj, i)
    rows = list(first.values())
    per_episode = options.normalize(scores.to(torch.float64)[rows], [group_ids[i] for i in rows])
    position = {traj: k for k, traj in enumerate(first)}
    return per_episode[[position[traj] for traj in traj_ids]]


def anchor_groups(group_ids: Sequence[Hashable], state_keys: Sequence[Hashable]) -> list[tuple[Hashable, Hashable]]:
    """GiGPO's anchor-state group of each step sample: its GRPO group and the state it acted in."""
    return list(zip(group_ids, state_keys))


def idle_turns(traj_ids: Sequence[Hashable], turns: Sequence[int], state_keys: Sequence[Hashable]) -> Tensor:
    """`[B]` bool: the turns after which the env state did not change — the next turn of the same
    episode acted in the same state (a reply the env rejected, a walk into a wall). A turn whose next
    turn is not in the batch (the episode's last) is not idle."""
    state_at = {(traj, turn): key for traj, turn, key in zip(traj_ids, turns, state_keys)}
    return torch.tensor([state_at.get((traj, turn + 1), object()) == key
                         for traj, turn, key in zip(traj_ids, turns, state_keys)], dtype=torch.bool)


def gigpo_rewards(scores: Tensor, returns: Tensor, traj_ids: Sequence[Hashable], group_ids: Sequence[Hashable],
                  state_keys: Sequence[Hashable], options: StepCreditOptions,
                  turns: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
    """(w_e · Â_episode + w_s · Â_step, Â_episode, Â_step), each `[B]` float64 (module docstring).
    With `cap_idle_turn_advantage` an idle turn (idle_turns) gets at most 0: what its episode earned
    later, the turns after it earned from the state it left unchanged."""
    episode = episode_normalized(scores, traj_ids, group_ids, options)
    step = options.normalize(returns.to(torch.float64), anchor_groups(group_ids, state_keys))
    combined = options.episode_reward_weight * episode + options.step_reward_weight * step
    if options.cap_idle_turn_advantage:
        combined = torch.where(idle_turns(traj_ids, turns, state_keys), combined.clamp(max=0.0), combined)
    return combined, episode, step


def response_segments(response_mask: Tensor) -> Tensor:
    """`[B, L]` long: k on the tokens of the row's k-th response segment (a maximal run of response
    tokens: one turn's reply in a whole-episode row), 0 elsewhere."""
    is_response = response_mask != 0
    before = torch.nn.functional.pad(is_response[:, :-1], (1, 0), value=False)
    starts = is_response & ~before
    return torch.where(is_response, starts.long().cumsum(-1), torch.zeros_like(starts, dtype=torch.long))


def segment_returns(token_rewards: Tensor, response_mask: Tensor, gamma: float) -> Tensor:
    """`[B, L]`: every token of response segment k gets G_k = S_k + γ G_{k+1}, where S_k is the sum of
    the segment's token rewards and segments are maximal runs of response tokens; 0 elsewhere."""
    is_response = response_mask != 0
    segment = response_segments(response_mask)
    count = int(segment.max()) if segment.numel() else 0
    sums = torch.zeros(token_rewards.shape[0], count + 1, dtype=torch.float64, device=token_rewards.device)
    sums.scatter_add_(1, segment, torch.where(is_response, token_rewards.to(torch.float64), torch.zeros((), dtype=torch.float64)))
    values = torch.zeros_like(sums)
    running = torch.zeros_like(sums[:, 0])
    for k in range(count, 0, -1):  # a row with fewer segments has zero sums past its last: no effect
        running = sums[:, k] + gamma * running
        values[:, k] = running
    out = values.gather(1, segment)
    return torch.where(is_response, out, torch.zeros_like(out)).to(token_rewards.dtype)


def _step_meta(inputs: AdvantageInputs, estimator: str) -> dict[str, list]:
    missing = [k for k in STEP_META if k not in inputs.meta]
    if missing or any(t is None for t in inputs.meta["step_index"]) or any(s is None for s in inputs.meta["state_key"]):
        raise ValueError(
            f"adv_estimator {estimator!r} trains on step samples (one per turn, with step_index and state_key), "
            "but this batch has whole trajectories; set custom_envs.<tag>.env_manager_cls to "
            "roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager")
    return inputs.meta


def _reinforce_on(inputs: AdvantageInputs, response_level: Tensor) -> tuple[Tensor, Tensor]:
    """Advantages and returns with `response_level` in place of the episode reward the pipeline put on
    each last response token (the token-level KL penalty, if any, is kept)."""
    if inputs.response_level_rewards is None:
        raise ValueError("step-level estimators need response_level_rewards (the reward on each last response token)")
    mask = inputs.response_mask
    placed = token_level_rewards(inputs.response_level_rewards.to(inputs.token_rewards.dtype), mask)
    token_rewards = inputs.token_rewards - placed + token_level_rewards(response_level.to(inputs.token_rewards.dtype), mask)
    returns = compute_discounted_returns(token_rewards, mask, inputs.gamma)
    return returns, returns


@register_adv_estimator("gigpo", needs_step_samples=True)
def gigpo_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """GiGPO: episode-level group advantage plus step-level anchor-state advantage."""
    meta = _step_meta(inputs, "gigpo")
    options = StepCreditOptions.from_options(inputs.options)
    returns = step_returns(meta["step_rewards"], meta["step_index"], options.step_reward_gamma)
    scores = torch.tensor([float(sum(r)) for r in meta["step_rewards"]], dtype=torch.float64)
    combined, _, _ = gigpo_rewards(scores, returns, meta["traj_id"], meta["traj_group_id"], meta["state_key"], options,
                                   meta["step_index"])
    return _reinforce_on(inputs, combined)


@register_adv_estimator("step_reinforce", needs_step_samples=True)
def step_reinforce_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """The discounted step return, normalised within the reward-normalisation groups."""
    meta = _step_meta(inputs, "step_reinforce")
    options = StepCreditOptions.from_options(inputs.options)
    returns = step_returns(meta["step_rewards"], meta["step_index"], options.step_reward_gamma)
    if options.norm_grouping == "batch":
        groups: list = [0] * len(returns)
    else:
        key = "tag" if options.norm_grouping in ("tags", "tag") else options.norm_grouping
        if key not in meta:
            raise KeyError(f"reward_normalization.grouping {options.norm_grouping!r}: samples carry no {key!r}")
        groups = list(meta[key])
    return _reinforce_on(inputs, options.normalize(returns, groups))


@register_adv_estimator("traj_gigpo", needs_episode_samples=True)
def traj_gigpo_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """GiGPO's two levels of credit on whole-episode samples (GRPO's cost: one row per episode):
    every token of turn t's reply gets w_e · Â_episode + w_s · Â_step(t), with Â_step(t) the
    discounted step return R_t normalised among the turns of the same GRPO group that acted in the
    same state (`turn_state_keys`). Token-level KL rewards, if any, are added as discounted returns."""
    meta = inputs.meta
    keys = meta.get("turn_state_keys")
    if not keys or any(k is None for k in keys):
        raise ValueError("adv_estimator 'traj_gigpo' needs whole-episode samples with turn_state_keys (the "
                         "TrajEnvManager records them); use adv_estimator gigpo with a StepEnvManager instead")
    options = StepCreditOptions.from_options(inputs.options)
    segments = response_segments(inputs.response_mask)
    # flatten the rows' turns into what gigpo's step samples would be, then reuse gigpo's credit
    rows, turns, groups, states, scores, returns = [], [], [], [], [], []
    for b, (rewards, keys_b) in enumerate(zip(meta["step_rewards"], keys)):
        count = int(segments[b].max()) if segments.shape[1] else 0
        if count != len(rewards) or len(keys_b) != len(rewards):
            raise ValueError(f"sample {b} has {count} reply segments, {len(rewards)} step rewards and {len(keys_b)} "
                             "state keys; traj_gigpo needs one of each per turn")
        for t in range(count):
            rows.append(b)
            turns.append(t + 1)  # segment numbers start at 1
            groups.append(meta["traj_group_id"][b])
            states.append(keys_b[t])
            scores.append(float(sum(rewards)))
            returns.append(discounted_step_return(rewards, t, options.step_reward_gamma))
    combined, _, _ = gigpo_rewards(torch.tensor(scores, dtype=torch.float64), torch.tensor(returns, dtype=torch.float64),
                                   rows, groups, states, options, turns)
    per_turn = torch.zeros(segments.shape[0], int(segments.max()) + 1 if segments.numel() else 1, dtype=torch.float64)
    per_turn[rows, turns] = combined
    mask = inputs.response_mask
    advantages = torch.where(mask != 0, per_turn.gather(1, segments), torch.zeros((), dtype=torch.float64))
    if inputs.response_level_rewards is not None:  # what is left of token_rewards is the KL penalty
        kl = inputs.token_rewards - token_level_rewards(inputs.response_level_rewards.to(inputs.token_rewards.dtype), mask)
        advantages = advantages + compute_discounted_returns(kl, mask, inputs.gamma).to(torch.float64)
    advantages = advantages.to(inputs.token_rewards.dtype)
    return advantages, advantages


@register_adv_estimator("agentic_reinforce")
def agentic_reinforce_estimator(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """Reinforce with one value per turn, discounted per turn (see segment_returns)."""
    returns = segment_returns(inputs.token_rewards, inputs.response_mask, inputs.gamma)
    return returns, returns


def turn_advantages(meta: dict[str, list], advantages: Tensor, response_mask: Tensor) -> dict[str, list] | None:
    """One entry per turn of the batch (episode, group, state key, turn index, the turn's mean token
    advantage): from step samples (one turn each) or from whole-episode rows with `turn_state_keys`
    (one entry per reply segment); None when the batch carries neither."""
    mask = response_mask.to(torch.float64)
    weighted = advantages.to(torch.float64) * mask
    if meta.get("step_index") and all(t is not None for t in meta["step_index"]):
        per_sample = weighted.sum(-1) / mask.sum(-1).clamp(min=1)
        return {"episode": list(meta["traj_id"]), "group": list(meta["traj_group_id"]), "state": list(meta["state_key"]),
                "turn": list(meta["step_index"]), "advantage": per_sample.tolist()}
    keys = meta.get("turn_state_keys")
    if not keys or any(k is None for k in keys):
        return None
    segments = response_segments(response_mask)
    width = int(segments.max()) + 1 if segments.numel() else 1
    sums = torch.zeros(segments.shape[0], width, dtype=torch.float64).scatter_add_(1, segments, weighted)
    counts = torch.zeros_like(sums).scatter_add_(1, segments, mask)
    turns: dict[str, list] = {"episode": [], "group": [], "state": [], "turn": [], "advantage": []}
    for b, keys_b in enumerate(keys):
        for t, key in enumerate(keys_b[: width - 1]):
            turns["episode"].append(b)
            turns["group"].append(meta["traj_group_id"][b])
            turns["state"].append(key)
            turns["turn"].append(t)
            turns["advantage"].append(float(sums[b, t + 1] / counts[b, t + 1].clamp(min=1)))
    return turns


def step_credit_metrics(meta: dict[str, list], advantages: Tensor, response_mask: Tensor,
                        prefix: str = "step") -> dict[str, float]:
    """Metrics of a batch's turns (step samples, or the turns of whole-episode rows under traj_gigpo):
    turns per episode, anchor-group sizes (how often a state repeats within a GRPO group), and each
    turn's mean advantage overall and by turn index."""
    turns = turn_advantages(meta, advantages, response_mask)
    if not turns or not turns["turn"]:
        return {}
    out: dict[str, float] = {}

    def stats(name: str, values: Sequence[float]) -> None:
        x = torch.tensor(values, dtype=torch.float64)
        out.update({f"{prefix}/{name}/mean": float(x.mean()), f"{prefix}/{name}/max": float(x.max()),
                    f"{prefix}/{name}/min": float(x.min())})

    stats("samples_per_episode", list(Counter(turns["episode"]).values()))
    anchors = Counter(anchor_groups(turns["group"], turns["state"]))
    stats("anchor_group_size", list(anchors.values()))
    repeated = sum(n for n in anchors.values() if n > 1)
    out[f"{prefix}/anchor_repeat_frac"] = repeated / len(turns["turn"])
    per_turn = torch.tensor(turns["advantage"], dtype=torch.float64)
    stats("advantage", per_turn.tolist())
    out[f"{prefix}/advantage/std"] = float(per_turn.std()) if len(per_turn) > 1 else 0.0
    for turn in sorted(set(turns["turn"])):
        rows = [i for i, t in enumerate(turns["turn"]) if t == turn]
        out[f"{prefix}/advantage_by_turn/{turn}"] = float(per_turn[rows].mean())
    return out
