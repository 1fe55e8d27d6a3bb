import math

import pytest
import torch

from roll.algorithms import entropy_for_input_ids, entropy_from_logits, logprobs_for_input_ids, logprobs_from_logits


def loop_logprob_and_entropy(row):
    """float64 reference for one token's logits (a Python list)."""
    top = max(row)
    lse = top + math.log(sum(math.exp(z - top) for z in row))
    probs = [math.exp(z - lse) for z in row]
    return lse, -sum(p * (z - lse) for p, z in zip(probs, row) if p > 0)


@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_against_float64_loop(chunk):
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 13) * 4
    labels = torch.randint(0, 13, (2, 5))
    lp = logprobs_from_logits(logits, labels, chunk_tokens=chunk)
    ent = entropy_from_logits(logits, chunk_tokens=chunk)
    assert lp.shape == ent.shape == (2, 5) and lp.dtype == torch.float32
    for b in range(2):
        for t in range(5):
            row = logits[b, t].double().tolist()
            lse, h = loop_logprob_and_entropy(row)
            assert lp[b, t].item() == pytest.approx(row[labels[b, t]] - lse, abs=1e-5)
            assert ent[b, t].item() == pytest.approx(h, abs=1e-5)


def test_gradients_match_autograd_of_naive_formula():
    torch.manual_seed(1)
    logits = torch.randn(3, 4, 7, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 7, (3, 4))
    w1, w2 = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    ours = (logprobs_from_logits(logits, labels, 2) * w1).sum() + (entropy_from_logits(logits, 5) * w2).sum()
    (g_ours,) = torch.autograd.grad(ours, logits)
    logp_all = torch.log_softmax(logits, -1)
    naive = (logp_all.gather(-1, labels.unsqueeze(-1)).squeeze(-1) * w1).sum() - (
        (logp_all.exp() * logp_all).sum(-1) * w2
    ).sum()
    (g_naive,) = torch.autograd.grad(naive, logits)
    assert torch.allclose(g_ours, g_naive, atol=1e-12)
    assert torch.autograd.gradcheck(lambda z: entropy_from_logits(z[:, :-1], 2), (logits,))


def test_bf16_logits_are_computed_in_float32():
    torch.manual_seed(2)
    logits = torch.randn(4, 50).to(torch.bfloat16).requires_grad_(True)
    labels = torch.randint(0, 50, (4,))
    lp = logprobs_from_logits(logits, labels)
    expected = torch.log_softmax(logits.detach().float(), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    assert lp.dtype == torch.float32 and torch.allclose(lp, expected, atol=1e-6)
    g = torch.autograd.grad(lp.sum(), logits)
    assert g[0].dtype == torch.bfloat16


def test_extreme_and_uniform_logits():
    logits = torch.tensor([[1e4, 0.0, -1e4], [0.0, 0.0, 0.0]], requires_grad=True)
    lp = logprobs_from_logits(logits, torch.tensor([1, 2]))
    ent = entropy_from_logits(logits)
    assert lp[0].item() == pytest.approx(-1e4) and lp[1].item() == pytest.approx(-math.log(3))
    assert ent[0].item() == pytest.approx(0.0, abs=1e-6) and ent[1].item() == pytest.approx(math.log(3))
    (lp.sum() + ent.sum()).backward()
    assert torch.isfinite(logits.grad).all()


def test_token_aligned_helpers_follow_the_batch_convention():
    torch.manual_seed(3)
    logits = torch.randn(2, 6, 9)
    input_ids = torch.randint(0, 9, (2, 6))
    lp = logprobs_for_input_ids(logits, input_ids)
    ent = entropy_for_input_ids(logits)
    assert lp.shape == ent.shape == (2, 6)
    assert torch.equal(lp[:, 0], torch.zeros(2)) and torch.equal(ent[:, 0], torch.zeros(2))
    # input_ids[b, t] is scored by the prediction made at position t − 1
    full = torch.log_softmax(logits, -1)
    assert lp[1, 4].item() == pytest.approx(full[1, 3, input_ids[1, 4]].item(), abs=1e-6)
    assert ent[0, 2].item() == pytest.approx(-(full[0, 1].exp() * full[0, 1]).sum().item(), abs=1e-6)
    with pytest.raises(ValueError, match="disagree"):
        logprobs_from_logits(logits, input_ids[:, 1:])
