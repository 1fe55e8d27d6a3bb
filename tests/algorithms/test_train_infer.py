"""train_infer_correction at each level, on numbers worked out by hand, and its identity case."""

import math

import pytest
import torch

from roll.algorithms import (
    CorrectionFilterConfig,
    ISWeightConfig,
    TrainInferCorrectionConfig,
    segment_masked_mean,
    train_infer_correction,
)
from roll.algorithms.train_infer import level_stats

E = math.exp
# One sample, two turns: tokens 0-1 are turn 1, token 2 an observation, token 3 turn 2.
OLD = torch.tensor([[-1.0, -1.0, -5.0, -1.0]])
INFER = torch.tensor([[-1.1, -0.9, 0.0, -1.2]])  # log r = 0.1, −0.1, (off mask), 0.2
MASK = torch.tensor([[1, 1, 0, 1]])
ON = MASK.bool()


def on_mask(t):
    return t[ON].tolist()


def test_segment_mean_is_taken_per_run_of_response_tokens():
    x = torch.tensor([[1.0, 3.0, 100.0, 7.0], [2.0, 2.0, 4.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 0]])
    assert segment_masked_mean(x, mask).tolist() == [[2.0, 2.0, 0.0, 7.0], [0.0, 3.0, 3.0, 0.0]]


@pytest.mark.parametrize("level, ratio", [
    ("token", [E(0.1), E(-0.1), E(0.2)]),
    ("segment", [1.0, 1.0, E(0.2)]),  # turn 1 averages 0.1 and −0.1
    ("geometric", [E(0.2 / 3)] * 3),
    ("sequence", [E(0.2)] * 3),
])
def test_ratio_at_each_level(level, ratio):
    got, _ = level_stats(OLD, INFER, MASK, level)
    assert on_mask(got) == pytest.approx(ratio, rel=1e-5)


def test_diff_at_each_level():
    d = [E(-1) - E(-1.1), E(-1) - E(-0.9), E(-1) - E(-1.2)]
    assert on_mask(level_stats(OLD, INFER, MASK, "token")[1]) == pytest.approx(d, rel=1e-5)
    assert on_mask(level_stats(OLD, INFER, MASK, "segment")[1]) == pytest.approx([(d[0] + d[1]) / 2] * 2 + [d[2]], rel=1e-5)
    assert on_mask(level_stats(OLD, INFER, MASK, "geometric")[1]) == pytest.approx([sum(d) / 3] * 3, rel=1e-5)
    assert on_mask(level_stats(OLD, INFER, MASK, "sequence")[1]) == pytest.approx([sum(d)] * 3, rel=1e-5)


def test_token_is_weight_is_truncated_at_the_upper_bound():
    config = TrainInferCorrectionConfig(is_weight=ISWeightConfig(enabled=True, weight_type="token", upper_bound=1.2))
    weight, keep, metrics = train_infer_correction(config, OLD, INFER, MASK)
    assert on_mask(weight) == pytest.approx([E(0.1), E(-0.1), 1.2], rel=1e-5)
    assert metrics["is_weight_clipfrac"] == pytest.approx(1 / 3)
    assert on_mask(keep) == [1, 1, 1]  # no filter enabled


def test_filters_combine_ratio_and_diff_at_their_levels():
    config = TrainInferCorrectionConfig(filters=[
        CorrectionFilterConfig(enabled=True, agg_type="segment", ratio_low=0.95, ratio_high=1.05),
        CorrectionFilterConfig(enabled=True, agg_type="token", ratio_enabled=False, diff_enabled=True,
                               diff_low=-0.035, diff_high=0.1),
        CorrectionFilterConfig(enabled=False, agg_type="token", ratio_low=2.0, ratio_high=3.0),  # off: no effect
    ])
    weight, keep, metrics = train_infer_correction(config, OLD, INFER, MASK)
    # segment ratio drops turn 2 (e^0.2); token diff drops token 1 (e^-1 − e^-0.9 = −0.0387)
    assert on_mask(keep) == [1, 0, 0]
    assert on_mask(weight) == [1.0, 1.0, 1.0]
    assert metrics["train_infer_segment_ratio_mask_mean"] == pytest.approx(2 / 3)
    assert metrics["train_infer_token_diff_mask_mean"] == pytest.approx(2 / 3)
    assert metrics["train_infer_final_mask_mean"] == pytest.approx(1 / 3)


def test_rolls_is_correct_config_filter_on_segments():
    # agent_val_frozen_lake-pg_var_is_correct.yaml: segment ratio in [0.8, 1.05] and diff in [−0.1, 0.1]
    config = TrainInferCorrectionConfig(filters=[CorrectionFilterConfig(
        enabled=True, agg_type="segment", ratio_enabled=True, diff_enabled=True,
        ratio_low=0.8, ratio_high=1.05, diff_low=-0.1, diff_high=0.1)])
    _, keep, _ = train_infer_correction(config, OLD, INFER, MASK)
    assert on_mask(keep) == [1, 1, 0]


@pytest.mark.parametrize("level", ["token", "segment", "geometric", "sequence"])
def test_identical_logprobs_make_every_correction_the_identity(level):
    torch.manual_seed(0)
    old = -torch.rand(3, 6) * 4
    mask = torch.tensor([[1, 1, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0], [1, 0, 1, 0, 1, 1]])
    config = TrainInferCorrectionConfig(
        is_weight=ISWeightConfig(enabled=True, weight_type=level, upper_bound=1.0),
        filters=[CorrectionFilterConfig(enabled=True, agg_type=level, ratio_low=1.0, ratio_high=1.0,
                                        diff_enabled=True, diff_low=0.0, diff_high=0.0)])
    weight, keep, metrics = train_infer_correction(config, old, old.clone(), mask)
    assert torch.equal(weight[mask.bool()], torch.ones(int(mask.sum())))
    assert torch.equal(keep * mask, mask)
    assert metrics["train_infer_kl"] == 0.0 and metrics["is_weight_clipfrac"] == 0.0


def test_an_unknown_level_names_the_registered_ones():
    config = TrainInferCorrectionConfig(is_weight=ISWeightConfig(enabled=True, weight_type="turn"))
    with pytest.raises(ValueError, match="one of .*segment"):
        train_infer_correction(config, OLD, INFER, MASK)
