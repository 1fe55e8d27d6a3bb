import math

import pytest
import torch

from roll.algorithms import (
    LOSS_AGG_MODES,
    agg_denominators,
    agg_loss,
    entropy_loss,
    kl_loss,
    ppo_policy_loss,
    value_loss,
)

LOSS = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0], [9.0, 9.0, 9.0, 9.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])  # row 3 is padding: not a sequence


def test_agg_modes_by_hand():
    assert agg_denominators(MASK) == (4, 2)
    assert agg_loss(LOSS, MASK, "token-mean").item() == 10 / 4
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum").item() == 10 / 2
    assert agg_loss(LOSS, MASK, "seq-mean-token-mean").item() == (2 + 4) / 2
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm").item() == 10 / (2 * 4)
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", norm_length=10).item() == 10 / (2 * 10)


def test_agg_with_whole_mini_batch_denominators():
    kw = dict(num_tokens=8, num_seqs=4)
    assert agg_loss(LOSS, MASK, "token-mean", **kw).item() == 10 / 8
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum", **kw).item() == 10 / 4
    assert agg_loss(LOSS, MASK, "seq-mean-token-mean", **kw).item() == 6 / 4
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", norm_length=5, **kw).item() == 10 / 20
    with pytest.raises(ValueError, match="loss_agg_mode"):
        agg_loss(LOSS, MASK, "sum")


def test_agg_all_zero_mask_is_zero_with_zero_gradient():
    x = LOSS.clone().requires_grad_(True)
    for mode in LOSS_AGG_MODES:
        out = agg_loss(x, torch.zeros_like(MASK), mode)
        assert out.item() == 0.0
        out.backward()
        assert torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_micro_batches_sum_to_the_mini_batch_gradient(mode, k):
    """Split a mini-batch into k micro-batches, each cut to its own longest row (dynamic batching);
    with whole-mini-batch denominators the accumulated gradient equals the single pass."""
    gen = torch.Generator().manual_seed(k)
    B, L, V = 10, 9, 6
    lengths = torch.randint(0, L + 1, (B,), generator=gen)
    lengths[0], lengths[1] = 0, 1  # an empty row and a one-token response
    mask = (torch.arange(L).unsqueeze(0) < lengths.unsqueeze(1)).long()
    feats = torch.randn(B, L, V, dtype=torch.float64, generator=gen)
    weight = torch.randn(V, dtype=torch.float64, generator=gen, requires_grad=True)
    advantages = torch.randn(B, L, dtype=torch.float64, generator=gen)
    old = torch.randn(B, L, dtype=torch.float64, generator=gen) * 0.1
    num_tokens, num_seqs = agg_denominators(mask)

    def losses(rows, width):
        x = feats[rows, :width] @ weight  # a per-token quantity that depends on the parameter
        m = mask[rows, :width]
        agg = agg_loss(torch.tanh(x) ** 2, m, mode, num_tokens, num_seqs, norm_length=L)
        pg, _ = ppo_policy_loss(x * 0.1, old[rows, :width], advantages[rows, :width], m, 0.2, 0.28, 3.0, mode, num_tokens, num_seqs, L)
        return agg + pg

    (full_grad,) = torch.autograd.grad(losses(torch.arange(B), L), weight)
    accumulated = torch.zeros_like(weight)
    for rows in torch.randperm(B, generator=gen).chunk(k):
        width = max(int(lengths[rows].max()), 1)
        accumulated += torch.autograd.grad(losses(rows, width), weight)[0]
    assert torch.allclose(accumulated, full_grad, atol=1e-6, rtol=0)
    assert full_grad.abs().sum() > 0


def test_ppo_policy_loss_by_hand():
    ratio = torch.tensor([[1.5, 0.5, 1.5, 0.5, 4.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0]], dtype=torch.float64)
    old = torch.zeros_like(ratio)
    logp = ratio.log().requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    # per token: max(−Aρ, −A clip(ρ, 0.8, 1.28)) = −1.28 (clipped), −0.5, 1.5, 0.8 (clipped)
    loss, m = ppo_policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg_mode="token-mean")
    assert loss.item() == pytest.approx((-1.28 - 0.5 + 1.5 + 0.8) / 4)
    assert m["pg_clipfrac"] == 0.5 and m["pg_clipfrac_dual"] == 0.0
    assert (m["ratio_mean"], m["ratio_max"], m["ratio_min"]) == pytest.approx((1.0, 1.5, 0.5))
    logs = [math.log(v) for v in (1.5, 0.5, 1.5, 0.5)]
    assert m["ppo_kl"] == m["approxkl"] == pytest.approx(sum(0.5 * v * v for v in logs) / 4)
    assert m["policykl"] == pytest.approx(sum(logs) / 4)
    assert m["ppo_ratio_low_clipfrac"] == 0.5 and m["ppo_ratio_high_clipfrac"] == 0.5
    loss.backward()
    # d/dlogp of −Aρ is −Aρ on unclipped tokens, 0 where the clipped branch won, /4 for token-mean
    assert logp.grad[0].tolist() == pytest.approx([0.0, -0.5 / 4, 1.5 / 4, 0.0, 0.0])


def test_dual_clip_bounds_negative_advantages():
    logp = torch.tensor([[math.log(4.0), math.log(4.0), math.log(1.2)]], dtype=torch.float64)
    adv = torch.tensor([[-1.0, 1.0, -2.0]], dtype=torch.float64)
    mask = torch.ones(1, 3)
    loss, m = ppo_policy_loss(logp, torch.zeros_like(logp), adv, mask, dual_clip=3.0, loss_agg_mode="token-mean")
    # token 1: max(4, 1.2) = 4 → min(4, 3) = 3; token 2: A > 0, untouched = −1.2; token 3: max(2.4, 2.4) < 6
    assert loss.item() == pytest.approx((3.0 - 1.2 + 2.4) / 3)
    assert m["pg_clipfrac_dual"] == pytest.approx(1 / 3)
    spec_c, _ = ppo_policy_loss(logp, torch.zeros_like(logp), adv, mask, clip_high=0.2, dual_clip=True, loss_agg_mode="token-mean")
    explicit, _ = ppo_policy_loss(logp, torch.zeros_like(logp), adv, mask, clip_high=0.2, dual_clip=1.4, loss_agg_mode="token-mean")
    assert spec_c.item() == explicit.item()
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_policy_loss(logp, torch.zeros_like(logp), adv, mask, dual_clip=0.5)


def test_extreme_log_ratios_stay_finite():
    logp = torch.tensor([[500.0, -500.0, 80.0, -1e4]], requires_grad=True)
    old = torch.zeros(1, 4)
    adv = torch.tensor([[-1.0, 1.0, -3.0, 2.0]])
    for dual in (None, 3.0):
        loss, metrics = ppo_policy_loss(logp, old, adv, torch.ones(1, 4), dual_clip=dual)
        assert torch.isfinite(loss)
        assert all(math.isfinite(v) for v in metrics.values())
        (g,) = torch.autograd.grad(loss, logp)
        assert torch.isfinite(g).all()
    k = kl_loss(logp, old, torch.ones(1, 4))
    assert torch.isfinite(k) and torch.isfinite(torch.autograd.grad(k, logp)[0]).all()


def test_kl_and_entropy_losses_by_hand():
    logp = torch.tensor([[-1.0, -2.0, 0.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.5, -1.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0]])
    k3 = [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]
    assert kl_loss(logp, ref, mask, loss_agg_mode="token-mean").item() == pytest.approx(sum(k3) / 2)
    assert kl_loss(logp, ref, mask, kind="mse", num_seqs=2, loss_agg_mode="seq-mean-token-sum").item() == pytest.approx((0.125 + 0.5) / 2)
    ent = torch.tensor([[0.5, 1.5, 0.0], [2.0, 9.0, 9.0]])
    emask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert entropy_loss(ent, emask).item() == pytest.approx((1.0 + 2.0) / 2)
    assert entropy_loss(ent, emask, loss_agg_mode="token-mean").item() == pytest.approx(4.0 / 3)


def test_value_loss_by_hand():
    values = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[0.5, 2.5, 3.1]], dtype=torch.float64)
    returns = torch.tensor([[2.0, 2.0, 0.0]], dtype=torch.float64)
    mask = torch.ones(1, 3)
    # clipped V: 0.7, 2.3, 3.0 → max((V−R)², (Vc−R)²) = 1.69, 0.09, 9
    loss, m = value_loss(values, old, returns, mask, value_clip=0.2, loss_agg_mode="token-mean")
    assert loss.item() == pytest.approx(0.5 * (1.69 + 0.09 + 9.0) / 3)
    assert m["vf_clipfrac"] == pytest.approx(2 / 3) and m["vpred_mean"] == pytest.approx(2.0)
    loss.backward()
    assert values.grad[0].tolist() == pytest.approx([0.0, 0.0, 3.0 / 3])  # clipped tokens pass no gradient
    plain, m = value_loss(values, old, returns, mask, loss_agg_mode="token-mean")
    assert plain.item() == pytest.approx(0.5 * (1 + 0 + 9) / 3) and m["vf_clipfrac"] == 0.0
