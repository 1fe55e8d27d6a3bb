"""gigpo, step_reinforce and agentic_reinforce on numbers worked out by hand.

The batch: one GRPO group of 3 FrozenLake-like episodes that pass through shared states, one step
sample per turn, γ_s = step_reward_gamma = 0.5:

    episode e1: states A, B, C   rewards 0, 0, 1   score 1   step returns 0.25, 0.5, 1
    episode e2: states A, B, D   rewards 0, 0, 0   score 0   step returns 0, 0, 0
    episode e3: states A, D      rewards 0, 0      score 0   step returns 0, 0

Anchor groups: A = {e1t0, e2t0, e3t0}, B = {e1t1, e2t1}, C = {e1t2}, D = {e2t2, e3t1}.
"""

from __future__ import annotations

import math

import pytest
import torch

from roll.algorithms import ADV_ESTIMATORS, compute_advantages, step_credit_metrics
from roll.algorithms.step_advantages import discounted_step_return, segment_returns

EPISODES = {"e1": (["A", "B", "C"], [0.0, 0.0, 1.0]), "e2": (["A", "B", "D"], [0.0, 0.0, 0.0]),
            "e3": (["A", "D"], [0.0, 0.0])}


def step_batch(group: str = "g0", episodes: dict = EPISODES):
    """8 step samples, each 2 prompt tokens then 2 response tokens; the pipeline's episode reward
    (here the raw score) sits on each last response token."""
    meta = {"traj_id": [], "traj_group_id": [], "step_index": [], "state_key": [], "step_rewards": []}
    for traj, (states, rewards) in episodes.items():
        for t, state in enumerate(states):
            meta["traj_id"].append(traj)
            meta["traj_group_id"].append(group)
            meta["step_index"].append(t)
            meta["state_key"].append(state)
            meta["step_rewards"].append(rewards)
    n = len(meta["traj_id"])
    mask = torch.tensor([[0, 0, 1, 1]] * n, dtype=torch.float32)
    scores = torch.tensor([sum(r) for r in meta["step_rewards"]])
    token_rewards = torch.zeros(n, 4)
    token_rewards[:, 3] = scores
    return meta, mask, token_rewards, scores


def run(estimator: str, gamma: float = 1.0, **options):
    meta, mask, token_rewards, scores = step_batch()
    options = {"step_reward_gamma": 0.5, "norm_method": "mean", **options}
    adv, ret = compute_advantages(estimator, token_rewards, mask, gamma, 0.95, response_level_rewards=scores,
                                  meta=meta, options=options)
    return adv, ret, mask


def test_discounted_step_returns_by_hand():
    assert discounted_step_return([0, 0, 1], 0, 0.5) == pytest.approx(0.25)
    assert discounted_step_return([0, 0, 1], 1, 0.5) == pytest.approx(0.5)
    assert discounted_step_return([-0.1, 0.2, 1], 0, 0.9) == pytest.approx(-0.1 + 0.9 * 0.2 + 0.81)
    with pytest.raises(ValueError, match="step_index 3 is outside an episode of 3 turns"):
        discounted_step_return([0, 0, 1], 3, 0.5)


def test_gigpo_mean_by_hand():
    adv, ret, mask = run("gigpo")
    # episode part (each episode once): scores 1, 0, 0, mean 1/3 -> 2/3, -1/3, -1/3
    # step part (mean within anchor group): A: .25,0,0 (mean 1/12) -> 1/6, -1/12, -1/12;
    # B: .5, 0 -> .25, -.25; C alone -> 0; D: 0, 0 -> 0, 0
    expected = [2 / 3 + 1 / 6, 2 / 3 + 0.25, 2 / 3, -1 / 3 - 1 / 12, -1 / 3 - 0.25, -1 / 3, -1 / 3 - 1 / 12, -1 / 3]
    assert adv[:, 2].tolist() == pytest.approx(expected, abs=1e-6)
    assert adv[:, 3].tolist() == pytest.approx(expected, abs=1e-6)  # γ = 1: both response tokens alike
    assert (adv[:, :2] == 0).all()
    assert torch.equal(adv, ret)


def test_gigpo_mean_std_and_weights_by_hand():
    adv, _, _ = run("gigpo", norm_method="mean_std", episode_reward_weight=1.0, step_reward_weight=0.5)
    root3 = math.sqrt(3)
    # episode: std of (1,0,0) = 1/√3 -> 2/√3, -1/√3, -1/√3
    episode = [2 / root3] * 3 + [-1 / root3] * 5
    # A: (.25,0,0): mean 1/12, std √(1/48) -> 2/√3, -1/√3, -1/√3; B: (.5, 0) -> ±1/√2; C, D: 0
    step = [2 / root3, 1 / math.sqrt(2), 0.0, -1 / root3, -1 / math.sqrt(2), 0.0, -1 / root3, 0.0]
    expected = [e + 0.5 * s for e, s in zip(episode, step)]
    assert adv[:, 3].tolist() == pytest.approx(expected, abs=1e-4)


def test_gigpo_anchor_groups_do_not_cross_grpo_groups():
    meta, mask, token_rewards, scores = step_batch()
    other, *_ = step_batch(group="g1")
    both = {k: meta[k] + [v if k != "traj_id" else f"{v}'" for v in other[k]] for k in meta}
    # the second group's e1 fails at C: the same states, other rewards
    flip = {"e1'": [0.0, 0.0, 0.0]}
    both["step_rewards"] = [flip.get(traj, r) for traj, r in zip(both["traj_id"], both["step_rewards"])]
    mask2 = torch.cat([mask, mask])
    scores2 = torch.tensor([sum(r) for r in both["step_rewards"]])
    token_rewards2 = torch.zeros(16, 4)
    token_rewards2[:, 3] = scores2
    adv, _ = compute_advantages("gigpo", token_rewards2, mask2, 1.0, 0.95, response_level_rewards=scores2, meta=both,
                                options={"step_reward_gamma": 0.5, "norm_method": "mean"})
    first, _, _ = run("gigpo")
    assert adv[:8, 3].tolist() == pytest.approx(first[:, 3].tolist(), abs=1e-6)  # g1 changed nothing in g0
    assert adv[8:, 3].abs().max() < 1e-6  # g1: every episode scored 0 and every return is 0


def test_gigpo_keeps_the_token_level_kl_penalty_and_discounts_with_gamma():
    meta, mask, token_rewards, scores = step_batch()
    kl = torch.zeros_like(token_rewards)
    kl[:, 2] = -0.1  # what add_token_level_kl would have put on the first response token
    adv, _ = compute_advantages("gigpo", token_rewards + kl, mask, 0.5, 0.95, response_level_rewards=scores, meta=meta,
                                options={"step_reward_gamma": 0.5, "norm_method": "mean"})
    plain, _, _ = run("gigpo")
    assert adv[:, 3].tolist() == pytest.approx(plain[:, 3].tolist(), abs=1e-6)
    assert adv[:, 2].tolist() == pytest.approx((-0.1 + 0.5 * plain[:, 3]).tolist(), abs=1e-6)


def test_step_reinforce_by_hand():
    adv, _, _ = run("step_reinforce", norm_grouping="traj_group_id")
    returns = [0.25, 0.5, 1.0, 0, 0, 0, 0, 0]
    mean = sum(returns) / 8
    assert adv[:, 3].tolist() == pytest.approx([r - mean for r in returns], abs=1e-6)


def test_step_estimators_refuse_whole_trajectories():
    meta, mask, token_rewards, scores = step_batch()
    meta["step_index"] = [None] * len(meta["step_index"])
    for name in ("gigpo", "step_reinforce"):
        assert ADV_ESTIMATORS.get(name).needs_step_samples
        with pytest.raises(ValueError, match="StepEnvManager"):
            compute_advantages(name, token_rewards, mask, 1.0, 0.95, response_level_rewards=scores, meta=meta)


def episode_batch(episodes: dict = EPISODES):
    """The same three episodes as whole-episode rows: per turn 2 observation tokens then 2 reply
    tokens (e3 right-padded), the raw score on each row's last reply token."""
    rows, width = len(episodes), 4 * max(len(states) for states, _ in episodes.values())
    meta = {"traj_group_id": ["g0"] * rows, "step_rewards": [], "turn_state_keys": []}
    mask = torch.zeros(rows, width)
    scores = torch.zeros(rows)
    token_rewards = torch.zeros(rows, width)
    for row, (states, rewards) in enumerate(episodes.values()):
        meta["step_rewards"].append(rewards)
        meta["turn_state_keys"].append(states)
        for t in range(len(states)):
            mask[row, 4 * t + 2: 4 * t + 4] = 1
        scores[row] = sum(rewards)
        token_rewards[row, 4 * len(states) - 1] = scores[row]
    return meta, mask, token_rewards, scores


def test_traj_gigpo_gives_each_turn_of_a_row_its_step_samples_gigpo_advantage():
    meta, mask, token_rewards, scores = episode_batch()
    adv, ret = compute_advantages("traj_gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores,
                                  meta=meta, options={"step_reward_gamma": 0.5, "norm_method": "mean"})
    # the numbers of test_gigpo_mean_by_hand, turn by turn: e1 turns 0-2, e2 turns 0-2, e3 turns 0-1
    expected = [[2 / 3 + 1 / 6, 2 / 3 + 0.25, 2 / 3], [-1 / 3 - 1 / 12, -1 / 3 - 0.25, -1 / 3], [-1 / 3 - 1 / 12, -1 / 3]]
    for row, per_turn in enumerate(expected):
        for t, value in enumerate(per_turn):
            assert adv[row, 4 * t + 2: 4 * t + 4].tolist() == pytest.approx([value] * 2, abs=1e-6)
    assert (adv[mask == 0] == 0).all() and torch.equal(adv, ret)
    kl = torch.where(mask != 0, torch.tensor(-0.1), torch.tensor(0.0))  # add_token_level_kl's penalty
    with_kl, _ = compute_advantages("traj_gigpo", token_rewards + kl, mask, 1.0, 0.95, response_level_rewards=scores,
                                    meta=meta, options={"step_reward_gamma": 0.5, "norm_method": "mean"})
    # γ = 1: each reply token also gets the KL penalties of itself and every later reply token
    later = torch.flip(torch.cumsum(torch.flip(kl, [1]), 1), [1])
    assert torch.allclose(with_kl[mask != 0], (adv + later)[mask != 0], atol=1e-6)


# e1 stays in A for a turn (a rejected reply: -0.1), then walks A -> B -> goal; e2 walks A -> C and fails
IDLE_EPISODES = {"e1": (["A", "A", "B"], [-0.1, 0.0, 1.0]), "e2": (["A", "C"], [0.0, 0.0])}
# by hand, γ_s = 0.5, method mean: scores 0.9, 0 -> episode term 0.45, -0.45; step returns e1 0.15, 0.5, 1,
# e2 0, 0; anchor A = (0.15, 0.5, 0), mean 0.65/3; B, C alone -> 0
IDLE_UNCAPPED = [0.45 + 0.15 - 0.65 / 3, 0.45 + 0.5 - 0.65 / 3, 0.45, -0.45 - 0.65 / 3, -0.45]


@pytest.mark.parametrize("cap", [False, True])
def test_cap_idle_turn_advantage_takes_the_episodes_credit_from_the_turn_that_changed_nothing(cap):
    options = {"step_reward_gamma": 0.5, "norm_method": "mean", "cap_idle_turn_advantage": cap}
    # only e1's first turn is idle: its next turn acted in the same state; e2's first turn moved to C
    expected = [0.0 if cap else IDLE_UNCAPPED[0]] + IDLE_UNCAPPED[1:]
    meta, mask, token_rewards, scores = step_batch(episodes=IDLE_EPISODES)
    adv, _ = compute_advantages("gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores, meta=meta,
                                options=options)
    assert adv[:, 3].tolist() == pytest.approx(expected, abs=1e-6)
    meta, mask, token_rewards, scores = episode_batch(IDLE_EPISODES)
    adv, _ = compute_advantages("traj_gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores,
                                meta=meta, options=options)
    assert [float(adv[0, 3]), float(adv[0, 7]), float(adv[0, 11]), float(adv[1, 3]), float(adv[1, 7])] == \
        pytest.approx(expected, abs=1e-6)


def test_traj_gigpo_refuses_step_samples_and_rows_whose_turns_do_not_match():
    assert ADV_ESTIMATORS.get("traj_gigpo").needs_episode_samples
    meta, mask, token_rewards, scores = episode_batch()
    with pytest.raises(ValueError, match="traj_gigpo' needs whole-episode samples with turn_state_keys"):
        compute_advantages("traj_gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores,
                           meta={**meta, "turn_state_keys": [None] * 3})
    meta["turn_state_keys"][2] = ["A"]
    with pytest.raises(ValueError, match="sample 2 has 2 reply segments, 2 step rewards and 1 state keys"):
        compute_advantages("traj_gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores, meta=meta)


def test_traj_gigpo_turn_metrics_equal_gigpo_step_metrics_on_the_same_episodes():
    meta, mask, token_rewards, scores = episode_batch()
    adv, _ = compute_advantages("traj_gigpo", token_rewards, mask, 1.0, 0.95, response_level_rewards=scores,
                                meta=meta, options={"step_reward_gamma": 0.5, "norm_method": "mean"})
    step_adv, _, step_mask = run("gigpo")
    got = step_credit_metrics(meta, adv, mask)
    assert got == pytest.approx(step_credit_metrics(step_batch()[0], step_adv, step_mask))
    assert got["step/samples_per_episode/max"] == 3 and got["step/anchor_group_size/max"] == 3  # e1-e3 at A
    assert got["step/advantage_by_turn/2"] == pytest.approx((2 / 3 - 1 / 3) / 2)


def test_agentic_reinforce_discounts_per_turn_by_hand():
    # one trajectory row: prompt, reply 1 (2 tokens), obs, reply 2 (1 token), obs, reply 3 (2 tokens)
    mask = torch.tensor([[0, 1, 1, 0, 1, 0, 1, 1], [0, 0, 1, 1, 0, 0, 0, 0]], dtype=torch.float32)
    rewards = torch.zeros(2, 8)
    rewards[0, 2], rewards[0, 7] = 0.5, 1.0  # S1 = .5, S2 = 0, S3 = 1
    rewards[1, 3] = -2.0
    got = segment_returns(rewards, mask, 0.5)
    # G3 = 1, G2 = 0 + .5·1 = .5, G1 = .5 + .5·.5 = .75; one value per segment
    assert got[0].tolist() == pytest.approx([0, 0.75, 0.75, 0, 0.5, 0, 1, 1])
    assert got[1].tolist() == pytest.approx([0, 0, -2, -2, 0, 0, 0, 0])
    adv, ret = compute_advantages("agentic_reinforce", rewards, mask, 0.5, 0.95)
    assert torch.allclose(adv, got) and torch.allclose(ret, got)
    assert not ADV_ESTIMATORS.get("agentic_reinforce").needs_step_samples


def test_step_credit_metrics_by_hand():
    meta, mask, token_rewards, scores = step_batch()
    adv, _, _ = run("gigpo")
    m = step_credit_metrics(meta, adv, mask)
    assert m["step/samples_per_episode/mean"] == pytest.approx(8 / 3)
    assert (m["step/samples_per_episode/max"], m["step/samples_per_episode/min"]) == (3, 2)
    assert m["step/anchor_group_size/mean"] == pytest.approx(2.0)  # A 3, B 2, C 1, D 2
    assert (m["step/anchor_group_size/max"], m["step/anchor_group_size/min"]) == (3, 1)
    assert m["step/anchor_repeat_frac"] == pytest.approx(7 / 8)  # all but C
    assert m["step/advantage_by_turn/2"] == pytest.approx((2 / 3 - 1 / 3) / 2)
    assert step_credit_metrics({"step_index": [None]}, adv[:1], mask[:1]) == {}
