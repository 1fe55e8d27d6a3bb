"""Packing relies on transformers: with attention_mask=None, use_cache=False and restarting
position_ids, sdpa and eager attention are block-diagonal. These tests catch a regression there."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.data.sequence_packing import split_packed
from tests.workers.helpers import make_batch


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_llama_dir"])
def test_packed_logits_equal_separate_forward_passes(attn, model_fixture, request):
    model_dir = request.getfixturevalue(model_fixture)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn).eval()
    lengths = [9, 4, 13, 6]
    batch = make_batch(lengths, seed=3)
    (mb,) = split_packed(batch, 64)
    with torch.no_grad():
        packed = model(**mb.model_inputs()).logits[0]
        for (row, start, n), i in zip(mb.segments, mb.sample_indices):
            alone = model(input_ids=batch.tensors["input_ids"][i : i + 1, :n]).logits[0]
            assert torch.allclose(packed[start : start + n], alone, atol=1e-5), (packed[start : start + n] - alone).abs().max()
        # control: the same row with one running position sequence does attend across samples, so
        # the comparison above can tell block-diagonal attention from plain causal attention
        running = model(input_ids=mb.input_ids, position_ids=torch.arange(mb.input_ids.shape[1])[None], use_cache=False).logits[0]
        start, n = mb.segments[1][1:]
        second = mb.sample_indices[1]
        alone = model(input_ids=batch.tensors["input_ids"][second : second + 1, :n]).logits[0]
        assert (running[start : start + n] - alone).abs().max() > 1e-3
