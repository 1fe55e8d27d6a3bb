"""The decode step's sampler: the distributions it draws from, and a request's seed deciding its draw."""

import pytest
import torch

from roll.strategies.generation import SamplingParams
from roll.strategies.sampling import NUCLEUS_FIRST_LOOK, sample_tokens

DRAWS = 6000


def _params(temperature=1.0, top_k=0, top_p=1.0) -> SamplingParams:
    return SamplingParams(max_new_tokens=1, do_sample=True, temperature=temperature, top_k=top_k, top_p=top_p)


def _frequencies(logits_row: torch.Tensor, **rule) -> torch.Tensor:
    """How often each token was drawn over DRAWS rows of the same logits, each row with its own seed."""
    logits = logits_row.expand(DRAWS, -1).clone()
    generators = [torch.Generator().manual_seed(seed) for seed in range(DRAWS)]
    tokens, _ = sample_tokens(logits, [_params(**rule)] * DRAWS, generators)
    return torch.bincount(tokens, minlength=logits.shape[1]).double() / DRAWS


def test_draws_follow_the_softmax_and_never_a_masked_token():
    logits = torch.tensor([0.0, 1.0, 2.0, float("-inf"), 0.5])
    seen = _frequencies(logits)
    assert seen[3] == 0  # a masked token (the vision engine masks its placeholder ids this way)
    assert torch.allclose(seen, torch.softmax(logits.double(), -1), atol=0.02)
    hot = _frequencies(logits, temperature=0.5)
    assert torch.allclose(hot, torch.softmax(logits.double() / 0.5, -1), atol=0.02)


def test_top_k_and_top_p_keep_what_they_should_in_proportion():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.0, 2.5])
    probs = torch.softmax(logits.double(), -1)
    top2 = _frequencies(logits, top_k=2)
    expected = torch.zeros(5, dtype=torch.float64)
    expected[[1, 4]] = probs[[1, 4]] / probs[[1, 4]].sum()
    assert torch.allclose(top2, expected, atol=0.02)
    # top_p 0.8: tokens 1 (0.46) and 4 (0.28) fall short, token 3 (0.17) reaches it; 2 and 0 are dropped
    nucleus = _frequencies(logits, top_p=0.8)
    kept = [1, 4, 3]
    expected = torch.zeros(5, dtype=torch.float64)
    expected[kept] = probs[kept] / probs[kept].sum()
    assert torch.allclose(nucleus, expected, atol=0.02)


def test_a_nucleus_wider_than_the_first_look_is_found_by_a_full_sort():
    vocab = 4 * NUCLEUS_FIRST_LOOK
    logits = -torch.arange(vocab, dtype=torch.float32) / vocab  # nearly flat: the nucleus spans most tokens
    probs = torch.softmax(logits.double(), -1)
    top_p = 0.9
    outside = int((probs.cumsum(-1) - probs < top_p).sum())  # tokens 0..outside-1 are kept
    assert outside > NUCLEUS_FIRST_LOOK
    seen = _frequencies(logits, top_p=top_p)
    assert seen[outside:].sum() == 0
    assert seen[NUCLEUS_FIRST_LOOK:outside].sum() > 0.5  # kept tokens beyond the first look are drawn


def test_a_requests_seed_decides_its_draw_whatever_shares_the_batch():
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    rules = [_params(), _params(top_k=5), _params(temperature=0.7, top_p=0.8), _params(), _params(top_k=5), _params()]
    together, _ = sample_tokens(logits, rules, [torch.Generator().manual_seed(100 + i) for i in range(6)])
    for i in range(6):
        alone, _ = sample_tokens(logits[i : i + 1], [rules[i]], [torch.Generator().manual_seed(100 + i)])
        assert alone.item() == together[i].item()


def test_logits_without_a_distribution_are_refused_by_name():
    logits = torch.tensor([[float("nan"), 0.0, 1.0]])
    with pytest.raises(ValueError, match="NaN or inf in the model's logits"):
        sample_tokens(logits, [_params()], [torch.Generator().manual_seed(0)])
