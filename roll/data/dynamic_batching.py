"""Dynamic batching: micro-batches cut by a token budget, each padded only to its own longest sample.

Samples are sorted by length (longest first) so that neighbours have similar lengths, samples of equal
length by their tokens (so the samples of one prompt, a GRPO group's replies of one length, are
neighbours and a micro-batch can run that prompt once: roll/strategies/shared_prefix.py), then a
micro-batch grows while `rows × round_up(longest, sequence_length_round)` stays within
`max_tokens_per_microbatch`. A sample longer than the budget gets a micro-batch of its own. Results are
mapped back to the original order by `scatter_to_batch` (roll/data/micro_batch.py), so a caller sees
the same `[B, L]` tensors as with plain padding.
"""

from __future__ import annotations

from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch, rows_micro_batch, sample_lengths, sample_tokens


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def plan_dynamic_batches(
    lengths: list[int], max_tokens_per_microbatch: int, sequence_length_round: int = 1, max_width: int | None = None,
    min_num_micro_batches: int = 1, tokens: list[list[int]] | None = None,
) -> list[tuple[list[int], int]]:
    """Groups of sample indices and each group's padded width; `tokens` (each sample's ids) orders samples
    of equal length.

    `min_num_micro_batches` (data-parallel ranks must run the same number of forward passes) splits the
    most expensive groups in two until there are enough, as far as there are samples."""
    if max_tokens_per_microbatch < 1:
        raise ValueError(
            f"dynamic batching needs max_tokens_per_microbatch ≥ 1 (got {max_tokens_per_microbatch}); "
            "set max_tokens_per_microbatch_in_train / _in_infer in the worker config"
        )
    if sequence_length_round < 1:
        raise ValueError(f"sequence_length_round must be ≥ 1, got {sequence_length_round}")

    def width_of(group: list[int]) -> int:
        width = _round_up(max(max(lengths[i] for i in group), 1), sequence_length_round)
        return min(width, max_width) if max_width else width

    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], tokens[i] if tokens else i, i))
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * width_of(groups[-1] + [i]) <= max_tokens_per_microbatch:
            groups[-1].append(i)
        else:
            groups.append([i])
    while len(groups) < min_num_micro_batches:
        splittable = [g for g in groups if len(g) > 1]
        if not splittable:
            break
        biggest = max(splittable, key=lambda g: len(g) * width_of(g))
        at = groups.index(biggest)
        half = len(biggest) // 2
        groups[at : at + 1] = [biggest[:half], biggest[half:]]
    return [(g, width_of(g)) for g in groups]


def split_dynamic(
    batch: Batch, max_tokens_per_microbatch: int, sequence_length_round: int = 1, min_num_micro_batches: int = 1
) -> list[MicroBatch]:
    """Micro-batches of `batch` under a token budget, each padded only to its own longest sample."""
    lengths = sample_lengths(batch.tensors["attention_mask"])
    ids = batch.tensors["input_ids"]
    tokens = sample_tokens(ids, lengths)
    plan = plan_dynamic_batches(lengths, max_tokens_per_microbatch, sequence_length_round, ids.shape[1],
                                min_num_micro_batches, tokens)
    return [rows_micro_batch(batch, group, width, lengths) for group, width in plan]
