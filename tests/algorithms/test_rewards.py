import math
import statistics

import pytest
import torch

from roll.algorithms import clip_rewards, normalize_rewards, token_level_rewards

EPS = 1e-6
SCORES = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 7.0], dtype=torch.float64)
GROUPS = ["a", "a", "a", "b", "b", "c"]  # a: std 1; b: identical; c: a group of one


def test_mean_std_by_hand_with_degenerate_groups():
    out = normalize_rewards(SCORES, GROUPS, "mean_std")
    expected = [-1 / (1 + EPS), 0.0, 1 / (1 + EPS), 0.0, 0.0, 0.0]
    assert out.tolist() == pytest.approx(expected, abs=1e-12)


def test_mean_and_identity_by_hand():
    assert normalize_rewards(SCORES, GROUPS, "mean").tolist() == pytest.approx([-1, 0, 1, 0, 0, 0])
    assert torch.equal(normalize_rewards(SCORES, GROUPS, "identity"), SCORES)


def test_batch_grouping_is_one_group():
    out = normalize_rewards(SCORES, ["all"] * 6, "mean_std")
    mean, std = statistics.mean(SCORES.tolist()), statistics.stdev(SCORES.tolist())  # stdev is unbiased
    assert out.tolist() == pytest.approx([(s - mean) / (std + EPS) for s in SCORES.tolist()], rel=1e-12)


def test_types_choose_mean_and_std_and_a_group_of_one_gets_zero_where_a_std_divides():
    vals = SCORES.tolist()
    batch_mean, batch_std = statistics.mean(vals), statistics.stdev(vals)
    out = normalize_rewards(SCORES, GROUPS, "identity", norm_mean_type="batch")
    # ROLL: without a std every score only loses the mean, the lone member of group c too
    assert out.tolist() == pytest.approx([v - batch_mean for v in vals])
    out = normalize_rewards(SCORES, GROUPS, "mean", norm_mean_type="group", norm_std_type="batch")
    group_means = [2, 2, 2, 5, 5, 7]
    expected = [(v - m) / (batch_std + EPS) for v, m in zip(vals, group_means)]
    assert out.tolist() == pytest.approx(expected[:5] + [0.0])


def test_a_type_left_unset_is_filled_from_the_method():
    # ROLL: method mean_std with only norm_mean_type set still divides by the (group) std
    out = normalize_rewards(SCORES, GROUPS, "mean_std", norm_mean_type="batch")
    batch_mean = statistics.mean(SCORES.tolist())
    assert out.tolist() == pytest.approx([(v - batch_mean) / (1 + EPS) for v in (1.0, 2.0, 3.0)] + [0.0, 0.0, 0.0])
    out = normalize_rewards(SCORES, GROUPS, "mean_std", norm_std_type="group")
    assert out.tolist() == pytest.approx([-1 / (1 + EPS), 0.0, 1 / (1 + EPS), 0.0, 0.0, 0.0])


def test_asym_clip_is_mean_std_as_in_rolls_reward_normalisation():
    scores = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0], dtype=torch.float64)
    mean_std = normalize_rewards(scores, ["g"] * 10, "mean_std")
    # by hand: mean 1, unbiased std sqrt(10): the winner is at +2.85, each loser at -0.316
    assert mean_std[-1].item() == pytest.approx(9 / (math.sqrt(10) + EPS))
    wide = torch.tensor([0.0] * 19 + [10.0], dtype=torch.float64)  # the winner at (10-0.5)/std = +4.36
    out = normalize_rewards(wide, ["g"] * 20, "asym_clip")
    # no [-1, 3] clamp (ROLL's older normalisation had one; its current one only picks the types)
    assert out[-1].item() == pytest.approx(9.5 / (statistics.stdev(wide.tolist()) + EPS)) and out[-1].item() > 4
    assert torch.equal(out, normalize_rewards(wide, ["g"] * 20, "mean_std"))
    typed = normalize_rewards(wide, ["g"] * 20, "asym_clip", norm_mean_type="batch")
    assert torch.equal(typed, out)  # one group: the batch is the group


def test_random_groups_against_float64_loop():
    torch.manual_seed(1)
    scores = torch.randn(20)
    groups = [int(g) for g in torch.randint(0, 5, (20,))]
    out = normalize_rewards(scores, groups, "mean_std")
    for i, g in enumerate(groups):
        members = [scores[j].item() for j in range(20) if groups[j] == g]
        if len(members) < 2:
            assert out[i].item() == 0.0
        else:
            expected = (scores[i].item() - statistics.mean(members)) / (statistics.stdev(members) + EPS)
            assert math.isclose(out[i].item(), expected, rel_tol=1e-5, abs_tol=1e-6)
    assert out.dtype == scores.dtype


def test_tuple_group_keys_and_bad_inputs():
    out = normalize_rewards(torch.tensor([0.0, 2.0]), [("t", 1), ("t", 1)], "mean")
    assert out.tolist() == [-1.0, 1.0]
    with pytest.raises(ValueError, match="method"):
        normalize_rewards(SCORES, GROUPS, "zscore")
    with pytest.raises(ValueError, match="norm_std_type"):
        normalize_rewards(SCORES, GROUPS, norm_std_type="tags")
    with pytest.raises(ValueError, match="one group key each"):
        normalize_rewards(SCORES, GROUPS[:3])


def test_clip_rewards_reports_fraction():
    clipped, frac = clip_rewards(torch.tensor([-3.0, 0.5, 2.0, -1.0]), 1.0)
    assert clipped.tolist() == [-1.0, 0.5, 1.0, -1.0]
    assert frac == 0.5
    same, frac = clip_rewards(torch.tensor([10.0]), None)
    assert same.tolist() == [10.0] and frac == 0.0


def test_token_rewards_right_left_padded_and_multi_segment():
    mask = torch.tensor(
        [
            [0, 0, 1, 1, 1, 0, 0],  # right-padded
            [0, 0, 0, 0, 1, 1, 1],  # left-padded: last token is the final position
            [0, 1, 1, 0, 0, 1, 0],  # two response segments
            [0, 1, 0, 0, 0, 0, 0],  # one-token response
            [0, 0, 0, 0, 0, 0, 0],  # no response at all: nothing to credit
        ]
    )
    out = token_level_rewards(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), mask)
    expected = torch.zeros(5, 7)
    expected[0, 4], expected[1, 6], expected[2, 5], expected[3, 1] = 1.0, 2.0, 3.0, 4.0
    assert torch.equal(out, expected)


def test_token_rewards_subtract_kl_on_response_tokens_only():
    mask = torch.tensor([[0, 1, 1, 0]])
    kl = torch.tensor([[9.0, 0.5, -0.25, 9.0]])
    out = token_level_rewards(torch.tensor([1.0]), mask, kl=kl, kl_coef=0.1)
    assert out.tolist()[0] == pytest.approx([0.0, -0.05, 1.025, 0.0])
