"""Weights from actor_train to actor_infer in buckets (step 1 of docs/pipeline.md's step list, bounded in memory).

Sent whole, a 135M model's fp32 weights (540 MB) exist four more times during a sync: the trainer's
copy, Ray's object store (whose shared pages then stay in the resident size of both workers, 515 MB
each in a probe, even after the object is freed) and the inference worker's deserialised copy beside
its own weights. Streamed in buckets of `model_update_buffer_size_mb`, one bucket exists at a time: it is
copied, stored, loaded and freed before the next, so the object store reuses the same pages.

Streaming needs both ends to take part of the weights: the trainer's strategy says which weights it
can copy alone (`inference_weight_bytes`: hf_train without LoRA) and the inference strategy whether it
loads a part at a time (`loads_weights_in_parts` in roll/strategies/registry.py: hf_infer). Otherwise
the plan is one bucket holding everything, as before. Async training keeps sending whole snapshots:
its trainer moves on while the rollout thread loads them later (async_rollout.py). A named bucket
travels as byte views of the trainer's live weights (roll/utils/shared_weights.py): one copy into the
store, one out of it into the inference model.
"""

from __future__ import annotations

from typing import Any

ALL_WEIGHTS = None  # a bucket that stands for every weight, fetched in one piece


def plan_buckets(weight_bytes: dict[str, int] | None, max_bytes: int) -> list[list[str] | None]:
    """Weight names in order, grouped so each bucket holds at most `max_bytes` (a single weight larger
    than that gets a bucket of its own); `[ALL_WEIGHTS]` when the sizes are unknown (None)."""
    if max_bytes <= 0:
        raise ValueError(f"a weight bucket must hold at least one byte, got max_bytes={max_bytes}")
    if weight_bytes is None:
        return [ALL_WEIGHTS]
    buckets: list[list[str] | None] = []
    current: list[str] = []
    filled = 0
    for name, size in weight_bytes.items():
        if current and filled + size > max_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(name)
        filled += size
    if current:
        buckets.append(current)
    return buckets


def stream_weights(train: Any, infer: Any, buckets: list[list[str] | None], version: int,
                   rank: int | None = None) -> None:
    """Copies actor_train's current weights into every inference rank (or only `rank`, a restarted
    one), one bucket at a time; the object store's copy of a bucket is dropped before the next."""
    for names in buckets:
        # stays in Ray's object store; a named bucket travels as views (roll/utils/shared_weights.py)
        part = train.execute_rank0_ref("get_state_dict" if names is ALL_WEIGHTS else "get_weight_bucket", names)
        if rank is None:
            infer.execute_all("load_weights", part, version)
        else:
            infer.execute_on(rank, "load_weights", part, version)
        del part  # the last reference: Ray frees the bucket, and the next one reuses its pages
