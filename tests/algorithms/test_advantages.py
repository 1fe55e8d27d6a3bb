import pytest
import torch

from roll.algorithms import (
    compute_advantages,
    compute_discounted_returns,
    compute_gae,
    masked_whiten,
    token_level_rewards,
)


def gae_loop(rewards, values, mask, gamma, lambd):
    """Plain float64 GAE over each row's response tokens, taken in order as consecutive steps."""
    B, L = len(mask), len(mask[0])
    adv, ret = [[0.0] * L for _ in range(B)], [[0.0] * L for _ in range(B)]
    for b in range(B):
        steps = [t for t in range(L) if mask[b][t]]
        next_v, next_a = 0.0, 0.0
        for t in reversed(steps):
            delta = rewards[b][t] + gamma * next_v - values[b][t]
            next_a = delta + gamma * lambd * next_a
            adv[b][t], ret[b][t] = next_a, next_a + values[b][t]
            next_v = values[b][t]
    return torch.tensor(adv, dtype=torch.float64), torch.tensor(ret, dtype=torch.float64)


def returns_loop(rewards, mask, gamma):
    B, L = len(mask), len(mask[0])
    out = [[0.0] * L for _ in range(B)]
    for b in range(B):
        running = 0.0
        for t in reversed([t for t in range(L) if mask[b][t]]):
            running = rewards[b][t] + gamma * running
            out[b][t] = running
    return torch.tensor(out, dtype=torch.float64)


def test_gae_by_hand():
    mask = torch.tensor([[0, 1, 1, 1, 0]])
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    values = torch.tensor([[9.0, 0.5, 0.6, 0.7, 9.0]], dtype=torch.float64)
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lambd=0.8)
    # t3: δ = 1 − 0.7 = 0.3; t2: δ = 0.9·0.7 − 0.6 = 0.03, A = 0.03 + 0.72·0.3; t1: δ = 0.04, A = 0.04 + 0.72·0.246
    assert adv[0].tolist() == pytest.approx([0.0, 0.21712, 0.246, 0.3, 0.0])
    assert ret[0].tolist() == pytest.approx([0.0, 0.71712, 0.846, 1.0, 0.0])


def test_discounted_returns_by_hand_skip_observation_tokens():
    mask = torch.tensor([[1, 1, 0, 1]])
    rewards = torch.tensor([[1.0, 0.0, 7.0, 2.0]])
    # steps are positions 0, 1, 3: G3 = 2, G1 = 0.5·2, G0 = 1 + 0.5·1; the 7 off-mask is ignored
    assert compute_discounted_returns(rewards, mask, 0.5).tolist() == [[1.5, 1.0, 0.0, 2.0]]


def test_random_batches_match_loops_left_and_right_padded():
    torch.manual_seed(0)
    B, L = 6, 15
    mask = (torch.rand(B, L) > 0.45).long()
    mask[0] = 0  # all-zero row
    mask[1] = 0
    mask[1, 3] = 1  # one-token response
    mask[2, :10], mask[2, 10:] = 0, 1  # left-padded
    rewards = torch.randn(B, L, dtype=torch.float64)
    values = torch.randn(B, L, dtype=torch.float64)
    adv, ret = compute_gae(rewards, values, mask, 0.95, 0.9)
    adv_ref, ret_ref = gae_loop(rewards.tolist(), values.tolist(), mask.tolist(), 0.95, 0.9)
    assert torch.allclose(adv, adv_ref, atol=1e-12) and torch.allclose(ret, ret_ref, atol=1e-12)
    assert adv[0].abs().sum() == 0 and ret[0].abs().sum() == 0
    assert adv[1, 3].item() == pytest.approx(rewards[1, 3].item() - values[1, 3].item())
    ret_g = compute_discounted_returns(rewards, mask, 0.97)
    assert torch.allclose(ret_g, returns_loop(rewards.tolist(), mask.tolist(), 0.97), atol=1e-12)


def test_all_zero_mask_gives_zeros():
    mask = torch.zeros(2, 4)
    for est in ("gae", "reinforce", "grpo"):
        adv, ret = compute_advantages(est, torch.ones(2, 4), mask, 1.0, 1.0, values=torch.ones(2, 4), whiten=True, clip=1.0)
        assert adv.abs().sum() == 0 and ret.abs().sum() == 0
        assert torch.isfinite(adv).all()


def test_multi_turn_three_segments():
    # prompt(2) seg1(3) obs(2) seg2(2) obs(2) seg3(2) pad(1)
    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0]])
    resp = [2, 3, 4, 7, 8, 11, 12]
    obs = [t for t in range(14) if t not in resp]
    kl = torch.full((1, 14), 0.1, dtype=torch.float64)
    rewards = token_level_rewards(torch.tensor([1.0], dtype=torch.float64), mask, kl=kl, kl_coef=0.5)
    assert rewards[0, 12].item() == pytest.approx(1.0 - 0.05)
    assert all(rewards[0, t].item() == pytest.approx(-0.05) for t in resp[:-1])
    assert all(rewards[0, t].item() == 0.0 for t in obs)

    values = torch.arange(14, dtype=torch.float64).unsqueeze(0) / 10
    values[0, obs] = 1e6  # the critic's output on observation tokens must never be used
    gamma, lambd = 0.9, 0.8
    adv, ret = compute_gae(rewards, values, mask, gamma, lambd)
    assert all(adv[0, t].item() == 0.0 and ret[0, t].item() == 0.0 for t in obs)
    # bootstrap across the gap: last token of seg1 (4) is followed by the first token of seg2 (7)
    delta4 = rewards[0, 4] + gamma * values[0, 7] - values[0, 4]
    assert adv[0, 4].item() == pytest.approx((delta4 + gamma * lambd * adv[0, 7]).item())
    delta8 = rewards[0, 8] + gamma * values[0, 11] - values[0, 8]
    assert adv[0, 8].item() == pytest.approx((delta8 + gamma * lambd * adv[0, 11]).item())
    assert adv[0, 12].item() == pytest.approx((rewards[0, 12] - values[0, 12]).item())  # V after the end = 0
    adv_ref, ret_ref = gae_loop(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lambd)
    assert torch.allclose(adv, adv_ref) and torch.allclose(ret, ret_ref)

    returns = compute_discounted_returns(rewards, mask, gamma)
    # the episode score reaches the first response token discounted by 6 response steps, not 10 positions
    expected_first = sum(gamma**i * rewards[0, t].item() for i, t in enumerate(resp))
    assert returns[0, 2].item() == pytest.approx(expected_first)
    assert all(returns[0, t].item() == 0.0 for t in obs)


def test_compute_advantages_grpo_whiten_and_clip():
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    rewards = torch.tensor([[0.0, 2.0, 0.0], [0.0, 0.0, -1.0]], dtype=torch.float64)
    adv, ret = compute_advantages("grpo", rewards, mask, gamma=1.0, lambd=1.0)
    assert ret.tolist() == [[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]]
    assert torch.equal(adv, ret)
    adv_w, ret_w = compute_advantages("reinforce", rewards, mask, 1.0, 1.0, whiten=True, clip=0.5)
    assert torch.equal(ret_w, ret)  # returns are never whitened
    whitened = masked_whiten(ret, mask) * mask
    assert torch.allclose(adv_w, whitened.clamp(-0.5, 0.5))
    assert adv_w[0, 2] == 0 and adv_w[1, 0] == 0
    assert adv_w.max().item() == 0.5 and adv_w.min().item() == -0.5


def test_compute_advantages_gae_and_errors():
    mask = torch.tensor([[1, 1]])
    rewards = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    values = torch.tensor([[0.25, 0.5]], dtype=torch.float64)
    adv, ret = compute_advantages("gae", rewards, mask, 1.0, 1.0, values=values)
    assert adv.tolist() == [[0.75, 0.5]] and ret.tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError, match="values"):
        compute_advantages("gae", rewards, mask, 1.0, 1.0)
    with pytest.raises(ValueError, match="adv_estimator"):
        compute_advantages("vtrace", rewards, mask, 1.0, 1.0)


def test_whiten_rewards_rescales_before_the_estimator():
    mask = torch.tensor([[1, 1, 1, 0]])
    rewards = torch.tensor([[1.0, 2.0, 3.0, 50.0]], dtype=torch.float64)
    _, ret = compute_advantages("reinforce", rewards, mask, 1.0, 1.0, whiten_rewards=True)
    # mean 2, unbiased std 1: (r − 2)/1 + 2 keeps the values here, so returns are 6, 5, 3
    assert ret.tolist()[0] == pytest.approx([6.0, 5.0, 3.0, 0.0])
    _, ret = compute_advantages("reinforce", rewards * 4, mask, 1.0, 1.0, whiten_rewards=True)
    # ×4: std 4, mean 8 → (4r − 8)/4 + 8 = r + 6 → 7, 8, 9 → returns 24, 17, 9
    assert ret.tolist()[0] == pytest.approx([24.0, 17.0, 9.0, 0.0])


def test_grpo_chain_from_scores_to_token_advantages():
    from roll.algorithms import normalize_rewards

    # two GRPO groups of two; the second group's scores are identical → no signal
    scores = torch.tensor([1.0, 0.0, 0.5, 0.5], dtype=torch.float64)
    rewards = normalize_rewards(scores, ["g1", "g1", "g2", "g2"], "mean_std")
    mask = torch.tensor([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 0]])
    adv, _ = compute_advantages("grpo", token_level_rewards(rewards, mask), mask, gamma=1.0, lambd=1.0)
    z = 0.5 / (2**-0.5 + 1e-6)  # (1 − 0.5) / unbiased std of {1, 0}
    expected = torch.tensor([[0, z, z, 0, z], [0, -z, 0, 0, 0], [0] * 5, [0] * 5], dtype=torch.float64)
    assert torch.allclose(adv, expected)
