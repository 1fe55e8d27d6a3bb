"""A lean forward pass over a pre-allocated, slot-based KV cache (Llama-family decoders).

Why not `model.generate`: on CPU its per-step overhead (mask building, cache concatenation, logits
processors, Python layers of generic plumbing) costs several times what the arithmetic needs. Here a
decode step is: embed, then for each layer call the model's own norm / projection / MLP modules (so
the numerics are transformers' own), write the new key/value into a pre-allocated buffer, and run one
scaled-dot-product attention over the occupied part of the buffer. Nothing grows by concatenation.

Layout: per layer, K and V buffers `[slots, kv_heads, capacity, head_dim]`, sized once from the
engine's budget (max_num_seqs slots of max_model_len tokens). A slot belongs to one session (one
episode) for as long as the engine keeps it, so an episode's keys/values survive between its turns
and only the new tokens of the next turn are prefilled.

Prefill packs the new tokens of several sequences into one `[N, hidden]` matrix (the token-wise
matmuls run once for all of them) and does attention per sequence; only each sequence's last hidden
state goes through the output layer (the one position a token is sampled from), so a 4k-token
prefill makes `[sequences, vocab]` logits, never `[tokens, vocab]`. Decode runs one token per row and
attends over the contiguous slot range `[lo, hi)` with a length mask, so no cache row is copied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "mistral")


def lean_forward_unsupported_reason(model: torch.nn.Module) -> str | None:
    """None when `model` can run on the lean path, else why not (so the caller can say so)."""
    config = model.config
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        return f"model_type {config.model_type!r} is not one of {SUPPORTED_MODEL_TYPES}"
    if getattr(config, "use_sliding_window", False) or (
        config.model_type == "mistral" and getattr(config, "sliding_window", None)
    ):
        return "sliding-window attention is not implemented on the lean path"
    attn = model.model.layers[0].self_attn
    if any(hasattr(attn, name) for name in ("q_norm", "k_norm")):
        return "q/k norms are not implemented on the lean path"
    return None


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class SlotKVCache:
    """K/V buffers for `slots` sessions of at most `capacity` tokens each, allocated once and never grown.

    The buffers are reserved with `torch.empty` (address space only) and a slot's rows are zeroed the
    first time it is claimed, so resident memory grows with the slots actually used, up to the budget
    and never past it. Zeroing matters: decode attends over positions up to the batch's longest row
    and masks the rest, and a masked key or value that held NaN bits would still poison the row
    (NaN · 0 = NaN)."""

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device,
                 slots: int, capacity: int) -> None:
        if slots < 1 or capacity < 1:
            raise ValueError(f"the KV cache needs at least one slot of one token, got {slots} slots × {capacity} tokens")
        self.num_layers, self.kv_heads, self.head_dim = num_layers, kv_heads, head_dim
        self.dtype, self.device = dtype, device
        self.slots, self.capacity = slots, capacity
        shape = (slots, kv_heads, capacity, head_dim)
        self.k = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.claimed: set[int] = set()

    def claim(self, slot: int) -> None:
        """Called when a slot is handed to a session: zeroes it the first time."""
        if slot not in self.claimed:
            for layer in self.k + self.v:
                layer[slot].zero_()
            self.claimed.add(slot)

    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        for buffers in (self.k, self.v):
            for layer in buffers:
                layer[dst, :, :length] = layer[src, :, :length]

    def nbytes(self) -> int:
        """The budget: bytes of every buffer (resident once every slot has been claimed)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


class LeanForward:
    """Runs a Llama-family causal LM over a SlotKVCache, reusing the model's own modules and weights
    (so weight updates loaded into the model are seen at once)."""

    def __init__(self, model: torch.nn.Module) -> None:
        reason = lean_forward_unsupported_reason(model)
        if reason:
            raise ValueError(f"the lean decode path cannot run this model: {reason}")
        self.model = model
        config = model.config
        self.layers = list(model.model.layers)
        attn = self.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.scaling = attn.scaling
        self.q_heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.group = self.q_heads // self.kv_heads
        param = next(model.parameters())
        self.dtype, self.device = param.dtype, param.device

    def new_cache(self, slots: int, capacity: int) -> SlotKVCache:
        return SlotKVCache(len(self.layers), self.kv_heads, self.head_dim, self.dtype, self.device, slots, capacity)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.model.model.rotary_emb(x, positions[None])
        return cos[0].unsqueeze(1), sin[0].unsqueeze(1)  # [N, 1, D]: broadcast over heads

    def _qkv(self, layer, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        attn = layer.self_attn
        n = h.shape[0]
        q = _rotate(attn.q_proj(h).view(n, self.q_heads, self.head_dim), cos, sin)
        k = _rotate(attn.k_proj(h).view(n, self.kv_heads, self.head_dim), cos, sin)
        v = attn.v_proj(h).view(n, self.kv_heads, self.head_dim)
        return q, k, v

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(self.model.model.norm(x)).float()

    @torch.inference_mode()
    def prefill(self, cache: SlotKVCache, chunks: list[tuple[int, int, list[int]]]) -> torch.Tensor:
        """Feeds each chunk `(slot, start_position, token_ids)` into its slot; returns the logits after
        each chunk's last token, `[len(chunks), vocab]` (float32)."""
        tokens = torch.tensor([t for _, _, ids in chunks for t in ids], dtype=torch.long, device=self.device)
        positions = torch.cat([torch.arange(start, start + len(ids)) for _, start, ids in chunks]).to(self.device)
        x = self.model.model.embed_tokens(tokens)
        cos, sin = self._rope(x, positions)
        offsets, total = [], 0
        for _, _, ids in chunks:
            offsets.append(total)
            total += len(ids)
        masks = []
        for slot, start, ids in chunks:
            t = len(ids)
            # query i (at position start+i) sees keys 0..start+i; rows repeat per query head in the group
            keys = torch.arange(start + t, device=self.device)
            mask = keys[None, :] <= (start + torch.arange(t, device=self.device))[:, None]
            masks.append(mask.repeat(self.group, 1))
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, layer.input_layernorm(x), cos, sin)
            outs = []
            for (slot, start, ids), off, mask in zip(chunks, offsets, masks):
                t = len(ids)
                cache.k[li][slot, :, start : start + t] = k[off : off + t].transpose(0, 1)
                cache.v[li][slot, :, start : start + t] = v[off : off + t].transpose(0, 1)
                # [T, Hq, D] -> [Hkv, group*T, D]: each kv head serves its group of query heads
                qq = q[off : off + t].view(t, self.kv_heads, self.group, self.head_dim).permute(1, 2, 0, 3)
                qq = qq.reshape(self.kv_heads, self.group * t, self.head_dim)
                out = F.scaled_dot_product_attention(
                    qq, cache.k[li][slot, :, : start + t], cache.v[li][slot, :, : start + t],
                    attn_mask=mask, scale=self.scaling,
                )
                out = out.view(self.kv_heads, self.group, t, self.head_dim).permute(2, 0, 1, 3)
                outs.append(out.reshape(t, self.q_heads * self.head_dim))
            x = x + layer.self_attn.o_proj(torch.cat(outs) if len(outs) > 1 else outs[0])
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        last = torch.tensor([off + len(ids) - 1 for off, (_, _, ids) in zip(offsets, chunks)], device=self.device)
        return self._logits(x[last])

    @torch.inference_mode()
    def decode(self, cache: SlotKVCache, slots: list[int], positions: list[int], tokens: list[int]) -> torch.Tensor:
        """One token per row: `tokens[i]` sits at `positions[i]` of slot `slots[i]`. Returns `[B, vocab]`."""
        b = len(slots)
        lo, hi = min(slots), max(slots) + 1
        slot_t = torch.tensor(slots, dtype=torch.long, device=self.device)
        pos_t = torch.tensor(positions, dtype=torch.long, device=self.device)
        x = self.model.model.embed_tokens(torch.tensor(tokens, dtype=torch.long, device=self.device))
        cos, sin = self._rope(x, pos_t)
        span = hi - lo
        width = max(positions) + 1
        row_pos = torch.zeros(span, dtype=torch.long, device=self.device)  # idle rows see key 0 only (no NaN)
        row_pos[slot_t - lo] = pos_t
        mask = (torch.arange(width, device=self.device)[None, :] <= row_pos[:, None])[:, None, None, :]
        dense = span == b and slots == list(range(lo, hi))
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, layer.input_layernorm(x), cos, sin)
            cache.k[li][slot_t, :, pos_t] = k
            cache.v[li][slot_t, :, pos_t] = v
            qq = q.view(b, self.kv_heads, self.group, self.head_dim)
            if not dense:
                full = torch.zeros(span, self.kv_heads, self.group, self.head_dim, dtype=q.dtype, device=self.device)
                full[slot_t - lo] = qq
                qq = full
            out = F.scaled_dot_product_attention(
                qq, cache.k[li][lo:hi, :, :width], cache.v[li][lo:hi, :, :width], attn_mask=mask, scale=self.scaling
            )
            if not dense:
                out = out[slot_t - lo]
            x = x + layer.self_attn.o_proj(out.reshape(b, self.q_heads * self.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self._logits(x)
