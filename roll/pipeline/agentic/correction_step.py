"""The driver's train-inference correction: with `enable_old_logprobs_recompute` (or whenever the
pipeline scored old log-probs in their own pass) the correction of roll/algorithms/train_infer.py runs
once on the whole batch, as in ROLL: the IS weight goes into the batch as `train_infer_is_weight` and the
filters zero `response_mask` where they reject a token. Without old log-probs in the batch the actor
applies the correction per micro-batch against its own forward pass (ActorWorker._train_infer_correction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roll.algorithms import train_infer_correction
from roll.data.batch import Batch

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig


def apply_train_infer_correction(batch: Batch, config: "AgenticConfig") -> dict[str, float]:
    """Sets batch["train_infer_is_weight"] and filters batch["response_mask"] in place; returns the
    correction's metrics under `actor/`. A no-op (no metrics) without old or generation log-probs."""
    if "old_logprobs" not in batch.tensors or "infer_logprobs" not in batch.tensors:
        return {}
    mask = batch["response_mask"]
    is_weight, keep, metrics = train_infer_correction(
        config.train_infer_correction, batch["old_logprobs"], batch["infer_logprobs"], mask)
    batch.tensors["train_infer_is_weight"] = is_weight.float()
    batch.tensors["response_mask"] = mask * keep.to(mask.dtype)
    return {f"actor/{k}": v for k, v in metrics.items()}
