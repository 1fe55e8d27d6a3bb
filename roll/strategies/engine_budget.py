"""The decode engine's fixed memory budget (hf_infer), from the run's config.

Keys, under `actor_infer.strategy_args.strategy_config` when `strategy_name: hf_infer`, named as vLLM
names the same limits (ROLL passes strategy_config to vLLM as engine arguments, so a config moved
between the two keeps its meaning):
- max_num_seqs: KV slots, i.e. sessions (episodes) whose keys/values are kept at once. Default: the
  envs that talk to one inference worker at once (the larger of train and val env counts over
  actor_infer's workers), at most 64. Fewer slots than envs is allowed: idle episodes lose their
  cache (their next turn is prefilled again) and new requests wait for a slot.
- max_model_len: tokens per slot (prompt + response of one request). Default: sequence_length.
- max_num_batched_tokens: new prompt tokens prefilled together in one engine step. Default: 4096.

The KV cache is max_num_seqs × max_model_len tokens, allocated once (roll/strategies/kv_forward.py).
No torch import here: config validation and the memory estimate read it before any worker starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

MAX_DEFAULT_SLOTS = 64
CONFIG_PREFIX = "actor_infer.strategy_args.strategy_config"


@dataclass(frozen=True)
class EngineBudget:
    max_num_seqs: int = MAX_DEFAULT_SLOTS
    max_model_len: int = 4096
    max_num_batched_tokens: int = 4096

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{CONFIG_PREFIX}.{f.name} must be an integer >= 1, got {value!r}")


def with_config(defaults: EngineBudget, strategy_config: dict[str, Any] | None) -> EngineBudget:
    """`defaults` overridden by the keys of hf_infer's strategy_config; an unknown key is an error
    (hf_infer has no other settings, so it would otherwise be silently ignored)."""
    config = dict(strategy_config or {})
    known = [f.name for f in fields(EngineBudget)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"{CONFIG_PREFIX}: {unknown} are not hf_infer settings; it takes {known} "
                         f"(see docs/rollout.md, 'The decode engine')")
    return replace(defaults, **config)


def budget_for_run(config: "AgenticConfig") -> EngineBudget:
    """The budget of one actor_infer worker of this run: its defaults from the run, then hf_infer's keys."""
    worker = config.actor_infer
    envs = max(config.train_env_manager.env_count, config.val_env_manager.env_count)
    slots = min(MAX_DEFAULT_SLOTS, max(1, math.ceil(envs / max(worker.num_workers, 1))))
    defaults = EngineBudget(max_num_seqs=slots, max_model_len=config.sequence_length)
    if worker.strategy_args.strategy_name != "hf_infer":
        return defaults  # other engines read strategy_config themselves
    return with_config(defaults, worker.strategy_args.strategy_config)
