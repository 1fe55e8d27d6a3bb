"""Sequence packing: several samples back to back in one row, with no attention between them.

A packed row has restarting `position_ids` (0, 1, … for each sample) and no `attention_mask`. With
`use_cache=False`, transformers (≥ 5) reads the restarts in `position_ids` and builds a block-diagonal
causal mask for sdpa and eager attention (flash-attention uses the same information as varlen
boundaries). This is the library's behaviour, not ours: tests/data/test_sequence_packing.py compares
packed logits with separate ones so that a regression in transformers is caught.

Rows are filled first-fit-decreasing up to `max_packed_length` tokens; a sample longer than that gets a
row of its own. Each micro-batch is one row (batch dimension 1). A batch of vision-language samples
(`meta["vision"]`) is not packed: each sample gets its own row, because 3-D rope positions restart
per sample in a way transformers cannot read as packed boundaries.
"""

from __future__ import annotations

import torch

from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch, position_ids_of, sample_lengths
from roll.data.vision import batch_vision


def plan_packing(lengths: list[int], max_packed_length: int, min_num_rows: int = 1) -> list[list[int]]:
    """Sample indices of each row (first-fit-decreasing), at least `min_num_rows` rows where samples allow."""
    if max_packed_length < 1:
        raise ValueError(
            f"sequence packing needs a row length ≥ 1 (got {max_packed_length}); set "
            "sequence_packing_args.max_packed_sequence_length_train / _forward or max_tokens_per_microbatch_*"
        )
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    used: list[int] = []
    for i in order:
        for r in range(len(rows)):
            if used[r] + lengths[i] <= max_packed_length:
                rows[r].append(i)
                used[r] += lengths[i]
                break
        else:
            rows.append([i])
            used.append(lengths[i])
    while len(rows) < min_num_rows:
        splittable = [r for r in range(len(rows)) if len(rows[r]) > 1]
        if not splittable:
            break
        r = max(splittable, key=lambda k: used[k])
        half = len(rows[r]) // 2
        first, second = rows[r][:half], rows[r][half:]
        rows[r : r + 1] = [first, second]
        used[r : r + 1] = [sum(lengths[i] for i in first), sum(lengths[i] for i in second)]
    return rows


def pack_row(batch: Batch, indices: list[int], lengths: list[int], pad_token_id: int = 0) -> MicroBatch:
    ids = batch.tensors["input_ids"]
    pos = position_ids_of(batch)
    id_parts, pos_parts, segments, start = [], [], [], 0
    for i in indices:
        n = lengths[i]
        id_parts.append(ids[i, :n])
        pos_parts.append(pos[i, :n])
        segments.append((0, start, n))
        start += n
    # One token of padding keeps an empty sample list well-formed; it is never read.
    if start == 0:
        id_parts.append(torch.full((1,), pad_token_id, dtype=ids.dtype, device=ids.device))
        pos_parts.append(torch.zeros(1, dtype=pos.dtype, device=pos.device))
    return MicroBatch(
        sample_indices=list(indices),
        input_ids=torch.cat(id_parts)[None, :],
        position_ids=torch.cat(pos_parts)[None, :],
        segments=segments,
        out_width=max([lengths[i] for i in indices], default=1),
        vision=batch_vision(batch.meta, indices),
    )


def split_packed(batch: Batch, max_packed_length: int, min_num_micro_batches: int = 1) -> list[MicroBatch]:
    """One packed row per micro-batch, covering every sample of `batch` exactly once."""
    lengths = sample_lengths(batch.tensors["attention_mask"])
    if any(v is not None for v in batch.meta.get("vision", ())):
        return [pack_row(batch, [i], lengths) for i in range(len(lengths))]
    return [pack_row(batch, row, lengths) for row in plan_packing(lengths, max_packed_length, min_num_micro_batches)]
