"""Micro-batches: how a batch of right-padded samples is laid out for one forward pass.

A `MicroBatch` is the model input for some samples of a batch, plus where each sample sits in it.
Three layouts share it, so the workers' forward/loss code is written once:
- plain padding (`split_padded`): rows are samples, every row as wide as the batch;
- dynamic batching (roll/data/dynamic_batching.py): rows are samples, padded to the micro-batch's own
  longest sample;
- sequence packing (roll/data/sequence_packing.py): a row holds several samples back to back.

Model outputs are first made token-aligned in the row layout (`aligned[:, p]` comes from the hidden
state at `p - 1`, as roll's `[B, L]` convention asks), then `unpack` cuts them into one row per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from roll.data.batch import Batch
from roll.data.vision import VisionInputs, batch_vision


@dataclass
class MicroBatch:
    sample_indices: list[int]  # positions in the source batch, in the order of `segments`
    input_ids: Tensor  # [rows, width]
    position_ids: Tensor  # [rows, width]
    segments: list[tuple[int, int, int]]  # (row, start, length) of each sample
    out_width: int  # width of the per-sample tensors `unpack` and `gather` return
    vision: VisionInputs | None = None  # the samples' images, in row order (vision-language samples)

    @property
    def num_samples(self) -> int:
        return len(self.sample_indices)

    @property
    def num_tokens(self) -> int:
        """Tokens the model computes on (padding included): the cost of this micro-batch."""
        return self.input_ids.numel()

    def model_inputs(self) -> dict[str, Tensor | bool | None]:
        # No attention mask: right-padded rows need none under causal attention (see rows_micro_batch),
        # and for packed rows transformers builds the block-diagonal mask from the restarting
        # position_ids. use_cache=False matters for packing: with a cache it attends across samples.
        inputs = {"input_ids": self.input_ids, "position_ids": self.position_ids, "attention_mask": None, "use_cache": False}
        if self.vision is not None:
            # the strategy replaces position_ids by the model's 3-D rope positions (roll/models/vision.py)
            inputs.update(pixel_values=self.vision.pixel_values, image_grid_thw=self.vision.image_grid_thw)
        return inputs

    def row_lengths(self) -> list[int]:
        """Real tokens in each row (rows are right-padded)."""
        lengths = [0] * self.input_ids.shape[0]
        for row, start, length in self.segments:
            lengths[row] = max(lengths[row], start + length)
        return lengths

    def unpack(self, aligned: Tensor) -> Tensor:
        """[rows, width, ...] token-aligned row outputs → [num_samples, out_width, ...], 0 on padding.

        Position 0 of each sample is set to 0: in a packed row it would hold the previous sample's
        prediction, and in roll's convention nothing predicts a sample's first token."""
        if len(self.segments) == aligned.shape[0] and all(s == (i, 0, s[2]) for i, s in enumerate(self.segments)):
            out = aligned[:, : self.out_width]
            keep = torch.arange(out.shape[1], device=out.device)[None, :] < torch.tensor(
                [s[2] for s in self.segments], device=out.device
            )[:, None]
            keep[:, 0] = False
            keep = keep.reshape(keep.shape + (1,) * (out.dim() - 2))
            return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))
        pieces = []
        for row, start, length in self.segments:
            piece = aligned[row, start : start + length]
            piece = torch.cat([torch.zeros_like(piece[:1]), piece[1:]], dim=0)
            pad = (0, 0) * (piece.dim() - 1) + (0, self.out_width - length)
            pieces.append(torch.nn.functional.pad(piece, pad))
        return torch.stack(pieces, dim=0)

    def to_rows(self, sample_aligned: Tensor) -> Tensor:
        """[num_samples, out_width] per-sample values → [rows, width] where the model sees each token,
        0 on padding and at each sample's first token (which nothing predicts): unpack's inverse."""
        rows = torch.zeros(self.input_ids.shape, dtype=sample_aligned.dtype, device=sample_aligned.device)
        for i, (row, start, length) in enumerate(self.segments):
            rows[row, start + 1 : start + length] = sample_aligned[i, 1:length]
        return rows

    def gather(self, tensor: Tensor) -> Tensor:
        """The rows of a source-batch tensor `[B, L, ...]` for these samples, cut or padded to out_width."""
        index = torch.tensor(self.sample_indices, dtype=torch.long, device=tensor.device)
        rows = tensor.index_select(0, index)
        if rows.dim() < 2:
            return rows
        if rows.shape[1] >= self.out_width:
            return rows[:, : self.out_width]
        pad = (0, 0) * (rows.dim() - 2) + (0, self.out_width - rows.shape[1])
        return torch.nn.functional.pad(rows, pad)


def sample_lengths(attention_mask: Tensor) -> list[int]:
    """Lengths of right-padded samples; raises if a mask is not ones-then-zeros (left padding, holes)."""
    lengths = attention_mask.sum(dim=1)
    width = attention_mask.shape[1]
    expected = (torch.arange(width, device=attention_mask.device)[None, :] < lengths[:, None]).to(attention_mask.dtype)
    if not torch.equal(attention_mask, expected):
        raise ValueError(
            "micro-batching expects right-padded samples (attention_mask = ones then zeros in every row); "
            "build batches with roll's token-aligned convention (roll/data/batch.py)"
        )
    return [int(n) for n in lengths.tolist()]


def position_ids_of(batch: Batch) -> Tensor:
    if "position_ids" in batch.tensors:
        return batch.tensors["position_ids"]
    ids = batch.tensors["input_ids"]
    return torch.arange(ids.shape[1], device=ids.device).expand_as(ids).contiguous()


def rows_micro_batch(batch: Batch, indices: list[int], width: int, lengths: list[int]) -> MicroBatch:
    """Samples `indices` as rows padded (or cut) to `width` — the plain and dynamic-batching layout."""
    index = torch.tensor(indices, dtype=torch.long)
    ids = batch.tensors["input_ids"].index_select(0, index.to(batch.tensors["input_ids"].device))
    pos = position_ids_of(batch).index_select(0, index.to(ids.device))

    def fit(t: Tensor) -> Tensor:
        return t[:, :width] if t.shape[1] >= width else torch.nn.functional.pad(t, (0, width - t.shape[1]))

    ids, pos = fit(ids), fit(pos)
    # No attention mask: with causal attention a right-padded sample's tokens never see the padding
    # after them, so the mask changes nothing we read, and without it attention takes its fast causal
    # path (no [L, L] mask built per layer). Padding positions keep counting up from the sample's last
    # position, because a restart would read as a packed sequence boundary (roll/data/sequence_packing.py).
    steps = torch.arange(width, device=pos.device)[None, :]
    n = torch.tensor([lengths[i] for i in indices], device=pos.device)[:, None]
    last = pos.gather(1, (n - 1).clamp(min=0))
    pos = torch.where(steps < n, pos, last + steps - n + 1)
    return MicroBatch(
        sample_indices=list(indices),
        input_ids=ids,
        position_ids=pos,
        segments=[(r, 0, lengths[i]) for r, i in enumerate(indices)],
        out_width=width,
        vision=batch_vision(batch.meta, indices),
    )


def sample_tokens(input_ids: Tensor, lengths: list[int]) -> list[list[int]]:
    """Each sample's ids without padding: the sort key that makes the samples of one prompt neighbours."""
    return [input_ids[i, :n].tolist() for i, n in enumerate(lengths)]


def split_padded(batch: Batch, micro_batch_size: int) -> list[MicroBatch]:
    """Plain padding: groups of `micro_batch_size` samples, each row as wide as the batch. The samples are
    taken in the order of their tokens, so the samples of one prompt (a GRPO group's answers, shuffled
    apart in a mini-batch) are neighbours and a micro-batch can run that prompt once
    (roll/strategies/shared_prefix.py). Which samples share a micro-batch changes no sum over them."""
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be ≥ 1, got {micro_batch_size}")
    lengths = sample_lengths(batch.tensors["attention_mask"])
    tokens = sample_tokens(batch.tensors["input_ids"], lengths)
    width = batch.tensors["input_ids"].shape[1]
    order = sorted(range(len(batch)), key=lambda i: (tokens[i], i))
    return [rows_micro_batch(batch, order[i : i + micro_batch_size], width, lengths)
            for i in range(0, len(batch), micro_batch_size)]


def scatter_to_batch(micro_batches: list[MicroBatch], outputs: list[Tensor], batch_size: int, width: int) -> Tensor:
    """Per-sample outputs of each micro-batch back into one `[batch_size, width]` tensor in source order."""
    first = outputs[0]
    result = torch.zeros((batch_size, width) + tuple(first.shape[2:]), dtype=first.dtype, device=first.device)
    for mb, out in zip(micro_batches, outputs):
        n = min(width, out.shape[1])
        index = torch.tensor(mb.sample_indices, dtype=torch.long, device=result.device)
        result[index, :n] = out[:, :n]
    return result
