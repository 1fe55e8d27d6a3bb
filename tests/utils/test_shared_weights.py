"""Weights as byte views: exact for every dtype, and views, not copies (through Ray's store:
tests/workers/test_weight_sync.py)."""

import torch

from roll.utils.shared_weights import SharedWeights


def _state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "w": torch.randn(3, 5, generator=g),
        "half": torch.randn(4, generator=g).to(torch.bfloat16),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "steps": torch.arange(6, dtype=torch.int64).view(2, 3),
    }


def test_views_are_the_tensors_bytes_without_a_copy():
    state = _state()
    shared = SharedWeights.of(state)
    assert shared.nbytes == sum(t.numel() * t.element_size() for t in state.values())
    back = shared.tensors()
    for name, tensor in state.items():
        assert back[name].dtype == tensor.dtype and back[name].shape == tensor.shape
        assert torch.equal(back[name], tensor)
    state["w"].add_(1.0)  # a view: the live tensor's change shows (why a reader must copy at once)
    assert torch.equal(shared.tensors()["w"], state["w"])
