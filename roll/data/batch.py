"""The batch container that flows between rollout, workers and the pipeline.

A `Batch` holds per-sample tensors (all with the same leading dimension), per-sample plain-Python
values (`meta`: group ids, tags, messages…) and batch-level `info`. It is deliberately small: a dict
of tensors plus lists, which Ray pickles cheaply and a reader understands at a glance.

Token-aligned convention used everywhere in roll: every per-token tensor is `[B, L]` and aligned with
`input_ids`, so `logprobs[b, t]` is log p(input_ids[b, t] | input_ids[b, :t]) (0 at t = 0), and
`response_mask[b, t]` is 1 where the policy generated `input_ids[b, t]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch


@dataclass
class Batch:
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    meta: dict[str, list] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sizes = {k: v.shape[0] for k, v in self.tensors.items()}
        sizes.update({k: len(v) for k, v in self.meta.items()})
        if len(set(sizes.values())) > 1:
            raise ValueError(f"Batch fields disagree on the number of samples: {sizes}")

    def __len__(self) -> int:
        for v in self.tensors.values():
            return v.shape[0]
        for v in self.meta.values():
            return len(v)
        return 0

    def __getitem__(self, key: str) -> torch.Tensor | list:
        if key in self.tensors:
            return self.tensors[key]
        if key in self.meta:
            return self.meta[key]
        raise KeyError(f"{key!r} is not in this batch; it has tensors {sorted(self.tensors)} and meta {sorted(self.meta)}")

    def __contains__(self, key: str) -> bool:
        return key in self.tensors or key in self.meta

    def index(self, idx: Sequence[int] | torch.Tensor | slice) -> "Batch":
        """The samples at `idx` (a slice, a list of ints or an index tensor), in that order."""
        if isinstance(idx, slice):
            positions = list(range(len(self)))[idx]
        else:
            positions = [int(i) for i in idx]
        index_tensor = torch.tensor(positions, dtype=torch.long)
        return Batch(
            tensors={k: v.index_select(0, index_tensor.to(v.device)) for k, v in self.tensors.items()},
            meta={k: [v[i] for i in positions] for k, v in self.meta.items()},
            info=dict(self.info),
        )

    def select(self, tensor_keys: Iterable[str] = (), meta_keys: Iterable[str] = ()) -> "Batch":
        return Batch(
            tensors={k: self.tensors[k] for k in tensor_keys},
            meta={k: self.meta[k] for k in meta_keys},
            info=dict(self.info),
        )

    def chunk(self, n: int) -> list["Batch"]:
        """n nearly equal consecutive parts (for data-parallel ranks); the first ones get the extra samples."""
        base, extra = divmod(len(self), n)
        parts, start = [], 0
        for rank in range(n):
            size = base + (1 if rank < extra else 0)
            parts.append(self.index(slice(start, start + size)))
            start += size
        return parts

    @staticmethod
    def cat(batches: Sequence["Batch"], pad_values: dict[str, float] | None = None) -> "Batch":
        """Concatenates batches along samples. Tensors whose second dimension differs are right-padded
        (with `pad_values[key]`, default 0) to the longest, so batches of different lengths can join."""
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch()
        pad_values = pad_values or {}
        tensors = {}
        for key in batches[0].tensors:
            parts = [b.tensors[key] for b in batches]
            if parts[0].dim() >= 2:
                width = max(p.shape[1] for p in parts)
                parts = [
                    torch.nn.functional.pad(p, (0, 0) * (p.dim() - 2) + (0, width - p.shape[1]), value=pad_values.get(key, 0))
                    for p in parts
                ]
            tensors[key] = torch.cat(parts, dim=0)
        meta = {key: [x for b in batches for x in b.meta[key]] for key in batches[0].meta}
        info: dict[str, Any] = {}
        for b in batches:
            info.update(b.info)
        return Batch(tensors, meta, info)
