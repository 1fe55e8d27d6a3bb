"""pg_variant losses on numbers worked out by hand (ROLL's formulas, docs/algorithms.md)."""

import math

import pytest
import torch

from roll.algorithms import PG_VARIANTS, PGInputs, PGVariantArgs, pg_loss_matrix

LN2 = math.log(2.0)
# Two tokens: ratio 2 (advantage +1) and ratio 0.5 (advantage −1).
OLD = torch.tensor([[-1.0, -2.0]])
LOGP = OLD + torch.tensor([[LN2, -LN2]])
ADV = torch.tensor([[1.0, -1.0]])
MASK = torch.ones(1, 2)


def loss_and_grad(variant, args=PGVariantArgs(), logp=LOGP, old=OLD, adv=ADV, scores=None):
    logp = logp.clone().requires_grad_(True)
    mask = torch.ones_like(logp)
    loss_mat, metrics = pg_loss_matrix(variant, PGInputs(logp, old, adv, mask, scores), args)
    (loss_mat * mask).sum().backward()
    return loss_mat.detach(), logp.grad, metrics


def test_all_of_rolls_variants_are_registered():
    assert set(PG_VARIANTS.names()) >= {"vanilla", "ppo", "tis", "topr", "cispo", "kimi15"}


def test_vanilla_is_minus_advantage_times_logprob():
    loss, grad, _ = loss_and_grad("vanilla")
    assert loss.tolist()[0] == pytest.approx([1 - LN2, -2 - LN2])
    assert grad.tolist()[0] == pytest.approx([-1.0, 1.0])


def test_ppo_clips_both_tokens():
    loss, grad, metrics = loss_and_grad("ppo")
    # max(−A·2, −A·1.2) = −1.2 and max(−(−1)·0.5, −(−1)·0.8) = 0.8: the clipped branch wins twice
    assert loss.tolist()[0] == pytest.approx([-1.2, 0.8])
    assert grad.tolist()[0] == pytest.approx([0.0, 0.0])
    assert metrics["clipfrac"] == 1.0 and metrics["ppo_ratio_high_clipfrac"] == 0.5


def test_tis_truncates_the_ratio_into_its_bounds():
    loss, grad, metrics = loss_and_grad("tis")  # bounds [0, 1]: weights 1 and 0.5
    assert loss.tolist()[0] == pytest.approx([1 - LN2, -0.5 * (2 + LN2)])
    assert grad.tolist()[0] == pytest.approx([-1.0, 0.5])
    assert metrics["tis_upper_clipfrac"] == 0.5


def test_topr_is_reinforce_on_positive_episodes_and_truncated_is_on_the_others():
    old, logp, adv = OLD.repeat(2, 1), LOGP.repeat(2, 1), ADV.repeat(2, 1)
    args = PGVariantArgs(topr_positive_weight=2.0, topr_negative_weight=1.0)
    loss, grad, _ = loss_and_grad("topr", args, logp, old, adv, scores=torch.tensor([1.0, 0.0]))
    assert loss[0].tolist() == pytest.approx([2 * (1 - LN2), 2 * (-2 - LN2)])  # positive: 2 · (−A logp)
    assert loss[1].tolist() == pytest.approx([1 - LN2, -0.5 * (2 + LN2)])  # score 0 counts as negative
    assert grad.flatten().tolist() == pytest.approx([-2.0, 2.0, -1.0, 0.5])
    with pytest.raises(ValueError, match="episode score"):
        loss_and_grad("topr")


def test_cispo_clips_the_weight_and_the_unified_mask_drops_tokens():
    loss, grad, metrics = loss_and_grad("cispo")  # weights clip(2) = 1.1 and clip(0.5) = 0.9
    assert loss.tolist()[0] == pytest.approx([1.1 * (1 - LN2), -0.9 * (2 + LN2)])
    assert grad.tolist()[0] == pytest.approx([-1.1, 0.9])
    assert metrics["cispo_upper_clipfrac"] == 0.5 and metrics["cispo_lower_clipfrac"] == 0.5
    loss, grad, metrics = loss_and_grad("cispo", PGVariantArgs(cispo_use_unified_mask=True))
    assert loss.tolist()[0] == [0.0, 0.0] and grad.tolist()[0] == [0.0, 0.0]  # A>0 & ρ>1.1, A<0 & ρ<0.9
    assert metrics["cispo_masked_tokens"] == 1.0


def test_kimi15_adds_a_squared_log_ratio_penalty():
    loss, grad, _ = loss_and_grad("kimi15", PGVariantArgs(kimi15_tau=0.1))
    assert loss.tolist()[0] == pytest.approx([1 - LN2 + 0.05 * LN2**2, -2 - LN2 + 0.05 * LN2**2])
    # d/dlogp: −A + τ·(logp − old) = −1 + 0.1·ln2 and 1 − 0.1·ln2
    assert grad.tolist()[0] == pytest.approx([-1 + 0.1 * LN2, 1 - 0.1 * LN2])


@pytest.mark.parametrize("variant", ["ppo", "tis", "topr", "cispo", "kimi15"])
def test_on_policy_every_variant_has_the_reinforce_gradient(variant):
    # ρ = 1: the IS weights are 1 (inside every clip range) and kimi15's penalty has zero gradient.
    args = PGVariantArgs(tis_upper_bound=1.0)
    _, grad, _ = loss_and_grad(variant, args, logp=OLD, old=OLD, scores=torch.tensor([0.0]))
    assert grad.tolist()[0] == pytest.approx([-1.0, 1.0])


def test_an_unknown_variant_names_the_registered_ones():
    with pytest.raises(ValueError, match="pg_variant must be one of .*topr"):
        loss_and_grad("trpo")
