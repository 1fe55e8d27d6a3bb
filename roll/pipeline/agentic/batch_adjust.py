"""`batch_adjust_mode`: make the number of training samples a multiple of the optimizer batch.

A step-wise rollout gives one sample per turn, so a batch of N episodes holds a varying number of
samples. ROLL then copies or deletes samples until the count is a multiple of the training batch
(per_device_train_batch_size × gradient_accumulation_steps × ranks), so that every optimizer step
sees a full mini-batch. The modes (ROLL's), for a batch of `size` samples and the multiple `m`,
with r = size mod m (nothing changes when r = 0):

- `copy`: append m − r samples drawn at random from the batch (without repeats when there are enough);
- `delete`: drop r samples drawn at random (`copy` instead when that would empty the batch);
- `auto`: `copy` when r ≥ size / 2 or size < m, else `delete`;
- `random_sample`: keep exactly m samples drawn at random (`copy` when size < m);
- None (roll's default): train on every sample; the last mini-batch may be smaller.

roll adjusts after the advantages are computed, so copies and deletions never change another
sample's advantage (GiGPO's group statistics see each real sample once).
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from roll.data.batch import Batch

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

BATCH_ADJUST_MODES = (None, "copy", "delete", "auto", "random_sample")


def adjusted_indices(size: int, multiple: int, mode: str | None, rng: random.Random) -> list[int]:
    """The rows of a batch of `size` samples to train on, under `mode` (module docstring); copies
    come after the original rows."""
    if mode not in BATCH_ADJUST_MODES:
        raise ValueError(f"batch_adjust_mode must be one of {BATCH_ADJUST_MODES}, got {mode!r}")
    if multiple < 1:
        raise ValueError(f"the sample multiple must be >= 1, got {multiple}")
    remainder = size % multiple
    if mode is None or remainder == 0 or size == 0:
        return list(range(size))
    if mode == "auto":
        mode = "copy" if remainder >= 0.5 * size or size < multiple else "delete"
    if mode == "random_sample" and size < multiple:
        mode = "copy"
    if mode == "delete" and remainder >= size:
        mode = "copy"
    if mode == "copy":
        missing = multiple - remainder
        extra = rng.sample(range(size), missing) if missing <= size else [rng.randrange(size) for _ in range(missing)]
        return list(range(size)) + extra
    if mode == "delete":
        return sorted(set(range(size)) - set(rng.sample(range(size), remainder)))
    return sorted(rng.sample(range(size), multiple))


def train_multiple(mini_batch_sizes: list[int]) -> int:
    """The sample count every trained role divides evenly: the lcm of their (mini-batch × ranks)."""
    return math.lcm(*mini_batch_sizes) if mini_batch_sizes else 1


def take_rows(batch: Batch, rows: list[int]) -> tuple[Batch, dict[str, float]]:
    """The batch's `rows` (from adjusted_indices), with metrics `system/batch_add_count` and
    `system/batch_remove_count` (as ROLL names them)."""
    kept = len(set(rows))
    metrics = {"system/batch_add_count": float(len(rows) - kept), "system/batch_remove_count": float(len(batch) - kept)}
    if rows == list(range(len(batch))):
        return batch, metrics
    return batch.index(rows), metrics


def max_samples_per_batch(config: "AgenticConfig") -> int:
    """The most training samples one step can bring: one per episode, or one per turn where a training
    env's manager makes step samples (then up to that env's max_steps per episode). The lr schedule's
    length is counted from it, so a decaying schedule never runs out before the run does."""
    from hydra.utils import get_class

    turns = [config.custom_envs[tag].max_steps for tag in config.train_env_manager.tags
             if getattr(get_class(config.custom_envs[tag].env_manager_cls), "step_samples", False)]
    return config.rollout_batch_size * max(turns, default=1)
