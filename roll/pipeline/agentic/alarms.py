"""Collapse alarms: signs that a policy has stopped exploring or degenerated, checked every step.

RAGEN's "echo trap" is the reference: an agent under RL can lock into one reply regardless of the
state (identical replies within a group, entropy near zero), degenerate into repeated tokens ("!!!!"),
run every reply to the token cap, or jump in KL just before it falls apart. Each check gives a
`collapse/<stat>` metric and an `alarm/<name>` flag (1.0 when tripped); a step that trips any
alarm logs one warning line naming them. Thresholds: AlarmConfig (`alarms:` in the config).
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roll.configs.report_config import AlarmConfig
from roll.data.batch import Batch
from roll.data.episodes import first_row_per_episode

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

logger = logging.getLogger("roll.alarms")

ALARMS = ("entropy_collapse", "identical_replies", "repeated_tokens", "validity_drop", "length_at_cap", "kl_jump")
KL_KEYS = ("actor/approxkl", "critic/kl")
KL_HISTORY = 10  # previous steps whose median a KL value is compared with
MIN_KL_HISTORY = 3


def response_spans(response_mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of 1s: one per turn's reply in a multi-turn trajectory."""
    spans, start = [], None
    for i, m in enumerate(response_mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(response_mask)))
    return spans


def turn_token_caps(config: "AgenticConfig") -> dict[str, int]:
    """Tag -> the new tokens a training turn may generate (the env's cap and the sampler's)."""
    generating = config.train_env_manager.generating_args or config.actor_infer.generating_args
    return {tag: min(env.max_tokens_per_step, generating.max_new_tokens) for tag, env in config.custom_envs.items()}


def identical_reply_share(actions: list[list[str]], group_ids: list[str]) -> float | None:
    """Share of replies that another episode of the same group gave at the same turn (groups of 2+)."""
    by_turn: dict[tuple[str, int], list[str]] = defaultdict(list)
    for replies, group in zip(actions, group_ids):
        for turn, reply in enumerate(replies):
            by_turn[(group, turn)].append(reply)
    repeated = total = 0
    for replies in by_turn.values():
        if len(replies) < 2:
            continue
        counts = Counter(replies)
        repeated += sum(c for c in counts.values() if c > 1)
        total += len(replies)
    return repeated / total if total else None


def reply_token_stats(batch: Batch, length_caps: dict[str, int], repeated_fraction: float) -> dict[str, float]:
    """Per reply (each turn of each trajectory): repeated-token share, cut-off-at-cap share, and the
    rollout's entropy estimate (mean -log p of the sampled tokens, an unbiased estimate of entropy)."""
    ids, mask, logprobs = batch["input_ids"], batch["response_mask"], batch["infer_logprobs"]
    repeated = at_cap = replies = long_replies = 0
    for row in range(len(batch)):
        cap = length_caps.get(batch.meta["tag"][row]) if "tag" in batch.meta else None
        for start, end in response_spans(mask[row].tolist()):
            replies += 1
            at_cap += int(cap is not None and end - start >= cap)
            body = ids[row, start:end - 1].tolist()  # the last token is the stop token or the cut-off one
            if len(body) >= 3:
                long_replies += 1
                repeated += int(Counter(body).most_common(1)[0][1] >= repeated_fraction * len(body))
    tokens = mask.sum().clamp(min=1)
    stats = {"collapse/rollout_entropy": float(-(logprobs * mask).sum() / tokens)}
    if replies:
        stats["collapse/length_at_cap_share"] = at_cap / replies
    if long_replies:
        stats["collapse/repeated_token_share"] = repeated / long_replies
    return stats


def mean_validity(metrics: dict[str, float]) -> float | None:
    values = [v for k, v in metrics.items() if k.startswith("env/") and k.endswith("/action_is_valid")]
    return sum(values) / len(values) if values else None


@dataclass
class CollapseWatch:
    """Checks each training step; keeps the validity and KL history the trend alarms compare with."""

    config: AlarmConfig
    length_caps: dict[str, int] = field(default_factory=dict)  # tag -> new tokens allowed per turn
    validity_history: list[float] = field(default_factory=list)
    kl_history: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def check(self, batch: Batch, metrics: dict[str, float], step: int) -> dict[str, float]:
        """The `collapse/*` stats and `alarm/*` flags of this step; logs one warning if any trips."""
        if not self.config.enabled:
            return {}
        stats = reply_token_stats(batch, self.length_caps, self.config.repeated_token_fraction)
        if "actions" in batch.meta and "traj_group_id" in batch.meta:
            # one row per episode: a step-wise episode's turn samples all carry its whole action list
            rows = first_row_per_episode(batch)
            share = identical_reply_share([batch.meta["actions"][i] for i in rows],
                                          [batch.meta["traj_group_id"][i] for i in rows])
            if share is not None:
                stats["collapse/identical_reply_share"] = share
        reasons = self._tripped(stats, metrics)
        out = {**stats, **{f"alarm/{name}": float(name in reasons) for name in ALARMS}}
        if reasons:
            logger.warning("collapse alarm at step %d: %s", step, "; ".join(reasons.values()))
        return out

    def _tripped(self, stats: dict[str, float], metrics: dict[str, float]) -> dict[str, str]:
        cfg, reasons = self.config, {}
        entropy_key = "actor/entropy" if "actor/entropy" in metrics else "collapse/rollout_entropy"
        entropy = metrics.get(entropy_key, stats.get(entropy_key))
        if entropy is not None and entropy < cfg.min_entropy:
            reasons["entropy_collapse"] = f"entropy collapse ({entropy_key} {entropy:.4f} < {cfg.min_entropy})"
        for name, key, limit, what in (
            ("identical_replies", "collapse/identical_reply_share", cfg.max_identical_reply_share, "replies repeated within their group"),
            ("repeated_tokens", "collapse/repeated_token_share", cfg.max_repeated_token_share, "replies made of one repeated token"),
            ("length_at_cap", "collapse/length_at_cap_share", cfg.max_length_at_cap_share, "replies cut off at the token cap"),
        ):
            if key in stats and stats[key] > limit:
                reasons[name] = f"{stats[key]:.0%} {what} (> {limit:.0%})"
        validity = mean_validity(metrics)
        if validity is not None:
            if self.validity_history and max(self.validity_history) - validity > cfg.validity_drop:
                reasons["validity_drop"] = (f"action validity fell to {validity:.3f} from its best {max(self.validity_history):.3f} "
                                            f"(drop > {cfg.validity_drop})")
            self.validity_history.append(validity)
        for key in KL_KEYS:
            if key not in metrics:
                continue
            value, previous = abs(metrics[key]), self.kl_history[key][-KL_HISTORY:]
            if len(previous) >= MIN_KL_HISTORY:
                median = statistics.median(previous)
                if value > cfg.min_kl_jump and value > cfg.kl_jump_factor * median:
                    reasons["kl_jump"] = f"{key} jumped to {value:.4g} (median of previous steps {median:.4g}, factor > {cfg.kl_jump_factor})"
            self.kl_history[key].append(value)
        return reasons
