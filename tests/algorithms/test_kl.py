import math

import pytest
import torch

from roll.algorithms import AdaptiveKLController, FixedKLController, kl_penalty


def test_estimators_by_hand():
    logp = torch.tensor([-1.0, -2.0, -0.5], dtype=torch.float64)
    ref = torch.tensor([-1.5, -1.0, -0.5], dtype=torch.float64)
    d = [0.5, -1.0, 0.0]  # logp - ref
    assert kl_penalty(logp, ref, "kl").tolist() == pytest.approx(d)
    assert kl_penalty(logp, ref, "abs").tolist() == pytest.approx([abs(v) for v in d])
    assert kl_penalty(logp, ref, "mse").tolist() == pytest.approx([0.5 * v * v for v in d])
    assert kl_penalty(logp, ref, "k3").tolist() == pytest.approx([math.exp(-v) + v - 1 for v in d])


def test_k3_is_clamped_and_nan_free_for_extreme_ratios():
    logp = torch.tensor([0.0, -1000.0, -1e-3, -80.0], requires_grad=True)
    ref = torch.tensor([-1000.0, 0.0, -1e-3, -1.0])
    k3 = kl_penalty(logp, ref, "k3")
    assert torch.isfinite(k3).all()
    assert k3[0].item() == pytest.approx(10.0) and k3[1].item() == pytest.approx(10.0)
    assert k3[2].item() == 0.0 and (k3 >= 0).all()
    k3.sum().backward()
    assert torch.isfinite(logp.grad).all()


def test_unknown_kind():
    with pytest.raises(ValueError, match="kl_penalty"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "full")


def test_fixed_controller_never_moves():
    ctl = FixedKLController(0.05)
    ctl.update(100.0, 10)
    assert ctl.value == 0.05


def test_adaptive_controller_by_hand():
    ctl = AdaptiveKLController(init_kl_coef=0.1, target_kl=6.0, horizon=10000)
    ctl.update(current_kl=9.0, n_steps=100)  # error 0.5 clipped to 0.2 → ×1.002
    assert ctl.value == pytest.approx(0.1002)
    ctl.update(current_kl=6.6, n_steps=100)  # error 0.1 → ×1.001
    assert ctl.value == pytest.approx(0.1002 * 1.001)
    ctl.update(current_kl=0.0, n_steps=1000)  # error −1 clipped to −0.2 → ×0.98
    assert ctl.value == pytest.approx(0.1002 * 1.001 * 0.98)
    with pytest.raises(ValueError):
        AdaptiveKLController(0.1, 0.0, 100)
