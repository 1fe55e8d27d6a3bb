import math

import torch

from roll.algorithms import masked_mean, masked_sum, masked_var, masked_whiten

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float64)
M = torch.tensor([[1, 1, 0], [0, 1, 0]])


def test_sum_and_mean_by_hand():
    assert masked_sum(X, M).item() == 8.0
    assert math.isclose(masked_mean(X, M).item(), 8 / 3)
    assert torch.allclose(masked_mean(X, M, dim=-1), torch.tensor([1.5, 5.0], dtype=torch.float64))
    assert torch.allclose(masked_sum(X, M, dim=0), torch.tensor([1.0, 7.0, 0.0], dtype=torch.float64))


def test_var_by_hand():
    # selected values 1, 2, 5: mean 8/3, squared deviations sum to 78/9
    assert math.isclose(masked_var(X, M).item(), 78 / 9 / 2)
    assert math.isclose(masked_var(X, M, unbiased=False).item(), 78 / 9 / 3)
    row_var = masked_var(X, M, dim=-1)
    assert torch.allclose(row_var, torch.tensor([0.5, 0.0], dtype=torch.float64))  # one token: 0


def test_empty_mask_gives_zero_and_finite_gradients():
    x = torch.randn(2, 3, requires_grad=True)
    empty = torch.zeros(2, 3)
    out = masked_mean(x, empty) + masked_var(x, empty) + masked_mean(x, empty, dim=-1).sum()
    assert out.item() == 0.0
    out.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_nan_at_masked_positions_does_not_leak():
    x = torch.tensor([[1.0, float("nan"), float("-inf")]], requires_grad=True)
    mask = torch.tensor([[1, 0, 0]])
    out = masked_mean(x, mask) + masked_var(x, torch.tensor([[1, 0, 0]]))
    assert out.item() == 1.0
    out.backward()
    assert torch.isfinite(x.grad).all()


def test_whiten_against_float64_loop():
    torch.manual_seed(0)
    x = torch.randn(3, 7, dtype=torch.float64) * 3 + 2
    mask = (torch.rand(3, 7) > 0.4).long()
    vals = [x[b, t].item() for b in range(3) for t in range(7) if mask[b, t]]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    out = masked_whiten(x, mask)
    for b in range(3):
        for t in range(7):
            assert math.isclose(out[b, t].item(), (x[b, t].item() - mean) / math.sqrt(var + 1e-8), rel_tol=1e-9)
    unshifted = masked_whiten(x, mask, shift_mean=False)
    assert math.isclose(masked_mean(unshifted, mask).item(), mean, rel_tol=1e-9)


def test_whiten_skipped_for_one_or_no_token():
    x = torch.tensor([[3.0, 4.0]])
    assert torch.equal(masked_whiten(x, torch.tensor([[0, 1]])), x)
    assert torch.equal(masked_whiten(x, torch.tensor([[0, 0]])), x)


def test_whiten_identical_values_stays_finite():
    x = torch.full((2, 4), 5.0)
    out = masked_whiten(x, torch.ones(2, 4))
    assert torch.equal(out, torch.zeros(2, 4))
